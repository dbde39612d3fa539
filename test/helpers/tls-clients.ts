import { X509Certificate } from 'node:crypto'
import http from 'node:http'
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2'
import https from 'node:https'
import { Readable } from 'node:stream'
import tls, { type ConnectionOptions, type TLSSocket } from 'node:tls'
import type { TestPki } from './tls-pki.js'

/** Real TLS clients for the TLS tests: HTTPS (HTTP/1.1), HTTP/2, bare handshakes. */

export interface Answer {
  status: number
  headers: http.IncomingHttpHeaders | IncomingHttpHeaders
  body: Buffer
  /** `1.1` or `2.0`. */
  httpVersion?: string
  /** The HTTP/1 socket the answer came on (keep-alive tests compare it). */
  socket?: TLSSocket
}

export const text = (a: Answer) => a.body.toString('utf8')
export const json = (a: Answer) => JSON.parse(text(a))

export const basic = (credential: string) =>
  `Basic ${Buffer.from(`${credential}:`).toString('base64')}`

export interface HttpsOptions {
  method?: string
  headers?: Record<string, string>
  body?: string | Buffer
  /** CA to trust (default: the test CA), and a client certificate to present. */
  ca?: string
  cert?: string
  key?: string
  /** Reuse connections (keep-alive tests); default a new connection per request. */
  agent?: https.Agent
}

/** One HTTPS request over HTTP/1.1 (ALPN `http/1.1`, as curl --http1.1 and the SDK send). */
export function httpsRequest(
  pki: TestPki,
  url: string,
  options: HttpsOptions = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: options.method ?? 'GET',
        headers: options.headers ?? {},
        ca: options.ca ?? pki.ca.cert,
        ...(options.cert ? { cert: options.cert, key: options.key } : {}),
        agent: options.agent ?? false,
      },
      (res) => {
        // Taken now: a keep-alive agent detaches the socket from the response at its end.
        const socket = res.socket as TLSSocket
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('error', reject)
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            httpVersion: res.httpVersion,
            socket,
          }),
        )
      },
    )
    req.on('error', reject)
    req.end(options.body)
  })
}

/** One plain-HTTP request (to show what a listener does with it). */
export function plainRequest(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      )
    })
    req.on('error', reject)
  })
}

/** An HTTP/2 session (ALPN `h2` only), connected. */
export async function h2Connect(
  pki: TestPki,
  url: string,
  options: { ca?: string } = {},
): Promise<ClientHttp2Session> {
  const session = http2.connect(url, { ca: options.ca ?? pki.ca.cert })
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve())
    session.once('error', reject)
  })
  return session
}

/**
 * One request on an HTTP/2 session. A large body is best given as a stream: written whole, a
 * buffer over the session's memory bound (10 MB) makes the client reset its own stream.
 */
export function h2Request(
  session: ClientHttp2Session,
  path: string,
  options: {
    method?: string
    headers?: Record<string, string>
    body?: string | Buffer | Readable
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': options.method ?? 'GET',
      ':path': path,
      ...(options.headers ?? {}),
    })
    let headers: IncomingHttpHeaders = {}
    const chunks: Buffer[] = []
    stream.on('response', (h) => {
      headers = h
    })
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('error', reject)
    stream.on('end', () =>
      resolve({ status: Number(headers[':status']), headers, body: Buffer.concat(chunks) }),
    )
    if (options.body instanceof Readable) options.body.pipe(stream)
    else stream.end(options.body)
  })
}

export type Handshake =
  | {
      ok: true
      protocol: string | null
      alpn: string | false | null
      certificate: X509Certificate
    }
  | { ok: false; code: string; message: string }

/** A bare TLS handshake to 127.0.0.1:port; what was negotiated, or why it failed. */
export function handshake(port: number, options: ConnectionOptions = {}): Promise<Handshake> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ...options })
    socket.once('secureConnect', () => {
      const raw = socket.getPeerX509Certificate()
      resolve({
        ok: true,
        protocol: socket.getProtocol(),
        alpn: socket.alpnProtocol,
        certificate: raw as X509Certificate,
      })
      socket.end()
    })
    socket.once('error', (error: NodeJS.ErrnoException) =>
      resolve({ ok: false, code: error.code ?? 'error', message: error.message }),
    )
  })
}

/**
 * Opens a TLS 1.2 connection (HTTP/1.1) and asks for a renegotiation: `renegotiated`, or the
 * client's error code when the server refuses it.
 */
export async function renegotiation(
  pki: TestPki,
  port: number,
  options: ConnectionOptions = {},
): Promise<string> {
  const socket = tls.connect({
    host: '127.0.0.1',
    port,
    servername: 'localhost',
    ca: pki.ca.cert,
    maxVersion: 'TLSv1.2',
    ALPNProtocols: ['http/1.1'],
    ...options,
  })
  try {
    await new Promise((resolve, reject) => {
      socket.once('secureConnect', resolve)
      socket.once('error', reject)
    })
    return await new Promise<string>((resolve) => {
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
      const started = socket.renegotiate({}, (error) =>
        resolve(error ? ((error as NodeJS.ErrnoException).code ?? 'error') : 'renegotiated'),
      )
      if (!started) resolve('not started')
    })
  } finally {
    socket.destroy()
  }
}

/** The fingerprint of the certificate a new connection to `port` is given. */
export async function servedFingerprint(pki: TestPki, port: number): Promise<string> {
  const result = await handshake(port, { ca: pki.ca.cert })
  if (!result.ok) throw new Error(`handshake failed: ${result.code} ${result.message}`)
  return result.certificate.fingerprint256
}

export const fingerprintOf = (pem: string) => new X509Certificate(pem).fingerprint256

/** Polls until `check` holds (at most `ms`). */
export async function eventually(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (Date.now() > until) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 50))
  }
}
