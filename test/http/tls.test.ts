import { execFile } from 'node:child_process'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import tls from 'node:tls'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ClientAuthMode, TlsPairFiles } from '../../src/config-tls.js'
import { loadTlsMaterial } from '../../src/http/tls-material.js'
import { MAX_CONCURRENT_STREAMS } from '../../src/http/tls-server.js'
import { Metrics } from '../../src/metrics/prometheus.js'
import { MAX_BLOB_BYTES } from '../../src/modules/blobs/blobs.service.js'
import { bytes, generated, multipart, sha256 } from '../helpers/blob-harness.js'
import {
  buildConsentTestApp,
  CONSENT,
  type ConsentTestApp,
  emailQuery,
} from '../helpers/consent.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import {
  basic,
  fingerprintOf,
  h2Connect,
  h2Request,
  handshake,
  httpsRequest,
  json,
  plainRequest,
  renegotiation,
  text,
} from '../helpers/tls-clients.js'
import { type Issued, makeTestPki, type TestPki } from '../helpers/tls-pki.js'

/**
 * Issue 19: native TLS on the listeners, in this process over real sockets, with certificates
 * made for the test by the `openssl` CLI. (Reloads: tls-reload.test.ts; `coffer serve`, the
 * production rule and SIGHUP: tls-processes.test.ts.)
 */

const execFileAsync = promisify(execFile)

let pki: TestPki
beforeAll(() => {
  pki = makeTestPki()
})
afterAll(() => pki?.close())

const filesOf = (issued: Issued): TlsPairFiles => ({
  certFile: issued.certFile,
  keyFile: issued.keyFile,
  certSetting: 'COFFER_TLS_CERT_FILE',
  keySetting: 'COFFER_TLS_KEY_FILE',
})

const materialOf = (issued: Issued, clientAuth?: ClientAuthMode) =>
  loadTlsMaterial(
    filesOf(issued),
    clientAuth ? { caFile: pki.ca.certFile, mode: clientAuth } : undefined,
  )

const portOf = (server: TestServer) => (server.testApp.app.server.address() as AddressInfo).port

const YEAR = 'max-age=31536000'

describe('main API over TLS', () => {
  let server: TestServer
  let port: number
  let auth: string

  beforeAll(async () => {
    server = await startTestServer({ tls: await materialOf(pki.leaf) })
    port = portOf(server)
    auth = basic(server.admin.api_key)
  })
  afterAll(() => server?.close())

  it('answers HTTPS over HTTP/1.1, with HSTS (one year by default)', async () => {
    const me = await httpsRequest(pki, `${server.url}/v1/auth/me`, {
      headers: { authorization: auth },
    })
    expect(me.status).toBe(200)
    expect(me.httpVersion).toBe('1.1')
    expect(me.headers['strict-transport-security']).toBe(YEAR)
    expect(me.headers['content-type']).toBe('application/json')
    expect(json(me).user.id).toBe(server.admin.userId)
    // The certificate is the one configured, for 127.0.0.1 (verified against the test CA).
    expect(me.socket?.getPeerX509Certificate()?.fingerprint256).toBe(fingerprintOf(pki.leaf.cert))
  })

  it('offers h2 and http/1.1 by ALPN: each client gets what it asks for', async () => {
    const ask = (ALPNProtocols: string[]) => handshake(port, { ca: pki.ca.cert, ALPNProtocols })
    expect(await ask(['h2', 'http/1.1'])).toMatchObject({ ok: true, alpn: 'h2' })
    expect(await ask(['http/1.1'])).toMatchObject({ ok: true, alpn: 'http/1.1' })
    // No ALPN at all (older HTTP/1 clients): HTTP/1.1, as above.
    expect(await handshake(port, { ca: pki.ca.cert })).toMatchObject({ ok: true, alpn: false })
  })

  it('answers HTTP/2: authenticated JSON calls and a form write', async () => {
    const session = await h2Connect(pki, server.url)
    try {
      expect(session.alpnProtocol).toBe('h2')
      const me = await h2Request(session, '/v1/auth/me', { headers: { authorization: auth } })
      expect(me.status).toBe(200)
      expect(me.headers['strict-transport-security']).toBe(YEAR)
      expect(me.headers.connection).toBeUndefined()
      expect(json(me)).toMatchObject({ result: 'success', user: { id: server.admin.userId } })
      const vault = await h2Request(session, '/v1/vaults', {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: `name=h2-${Date.now()}`,
      })
      expect(vault.status, text(vault)).toBe(200)
      const v = json(vault).vault.id
      const content = { name: 'Ada', tags: ['h2'], nested: { ok: true } }
      const created = await h2Request(session, `/v2/vaults/${v}/documents`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ document: content }),
      })
      expect(created.status, text(created)).toBe(200)
      const id = json(created).document_id
      const read = await h2Request(session, `/v2/vaults/${v}/documents/${id}`, {
        headers: { authorization: auth },
      })
      expect(json(read).documents[0].document).toEqual(content)
      // A malformed credential is refused in the envelope as over HTTP/1, HSTS included.
      const bad = { authorization: basic('not-a-key') }
      const refused = await h2Request(session, '/v1/auth/me', { headers: bad })
      const overHttp1 = await httpsRequest(pki, `${server.url}/v1/auth/me`, { headers: bad })
      expect(refused.status).toBe(overHttp1.status)
      expect(json(refused).error).toEqual(json(overHttp1).error)
      expect(refused.headers['strict-transport-security']).toBe(YEAR)
    } finally {
      session.close()
    }
  })

  it('curl works over HTTP/2 and HTTP/1.1 with the test CA, and refuses the server without it', async () => {
    const curl = async (...args: string[]) => {
      try {
        const { stdout } = await execFileAsync('curl', [
          '-sS',
          '-D',
          '-',
          '-u',
          `${server.admin.api_key}:`,
          '-w',
          '\nversion=%{http_version}',
          ...args,
          `${server.url}/v1/auth/me`,
        ])
        return { code: 0, stdout, stderr: '' }
      } catch (error) {
        const e = error as { code?: number | string; stdout?: string; stderr?: string }
        // No curl on this machine is a failure, not a skip: the issue promises it works.
        if (e.code === 'ENOENT') throw new Error('this test needs the curl command')
        return { code: Number(e.code), stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
      }
    }
    for (const [flag, version] of [
      ['--http2', '2'],
      ['--http1.1', '1.1'],
    ] as const) {
      const answer = await curl('--cacert', pki.ca.certFile, flag)
      expect(answer.code, answer.stderr).toBe(0)
      expect(answer.stdout).toMatch(new RegExp(`^HTTP/${version.replace('.', '\\.')} 200`))
      expect(answer.stdout).toMatch(/^strict-transport-security: max-age=31536000\r?$/im)
      expect(answer.stdout).toContain(`"id":"${server.admin.userId}"`)
      expect(answer.stdout.trim().endsWith(`version=${version}`)).toBe(true)
    }
    // Verification is on: without the CA, curl refuses the certificate (exit 60).
    const untrusted = await curl('--cacert', pki.foreignCa.certFile)
    expect(untrusted.code).toBe(60)
  })

  it('bounds the streams one HTTP/2 connection may open at once (advertised in its SETTINGS)', async () => {
    const session = await h2Connect(pki, server.url)
    try {
      // The server's SETTINGS frame arrives with the handshake; a request makes sure it was read.
      await h2Request(session, '/healthz', {})
      expect(session.remoteSettings.maxConcurrentStreams).toBe(MAX_CONCURRENT_STREAMS)
    } finally {
      session.close()
    }
  })

  it('uploads and downloads BLOBs over HTTP/2: a raw body and a multipart form', async () => {
    const session = await h2Connect(pki, server.url)
    try {
      const vault = await h2Request(session, '/v1/vaults', {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: `name=h2-blobs-${Date.now()}`,
      })
      const v = json(vault).vault.id
      // A few MiB: many DATA frames, flow control on both sides.
      const data = bytes(3 * 1024 * 1024 + 17, 5)
      const raw = await h2Request(session, `/v1/vaults/${v}/blobs?filename=scan.bin`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/octet-stream' },
        body: data,
      })
      expect(raw.status, text(raw)).toBe(200)
      const down = await h2Request(session, `/v1/vaults/${v}/blobs/${json(raw).blob_id}`, {
        headers: { authorization: auth },
      })
      expect(down.status).toBe(200)
      expect(down.headers['content-type']).toBe('application/octet-stream')
      expect(down.headers['content-length']).toBe(String(data.length))
      expect(down.headers['strict-transport-security']).toBe(YEAR)
      expect(sha256(down.body)).toBe(sha256(data))

      const file = bytes(256 * 1024, 9)
      const form = multipart([
        { name: 'file', filename: 'photo.png', type: 'image/png', data: file },
      ])
      const multi = await h2Request(session, `/v1/vaults/${v}/blobs`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': form.contentType },
        body: form.payload,
      })
      expect(multi.status, text(multi)).toBe(200)
      const back = await h2Request(session, `/v1/vaults/${v}/blobs/${json(multi).blob_id}`, {
        headers: { authorization: auth },
      })
      expect(back.headers['content-type']).toBe('image/png')
      expect(sha256(back.body)).toBe(sha256(file))
    } finally {
      session.close()
    }
  })

  it('refuses a BLOB over the limit over HTTP/2 with 413; the session stays usable', async () => {
    const session = await h2Connect(pki, server.url)
    try {
      const vault = await h2Request(session, '/v1/vaults', {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: `name=h2-limit-${Date.now()}`,
      })
      const path = `/v1/vaults/${json(vault).vault.id}/blobs?filename=big.bin`
      const headers = { authorization: auth, 'content-type': 'application/octet-stream' }
      const size = MAX_BLOB_BYTES + 1
      // Declared too large: refused before the body is read. Undeclared: at the byte past it.
      for (const declared of [true, false]) {
        const refused = await h2Request(session, path, {
          method: 'POST',
          headers: declared ? { ...headers, 'content-length': String(size) } : headers,
          body: Readable.from(generated(size)),
        })
        expect(refused.status, String(declared)).toBe(413)
        expect(json(refused).error.code).toBe('PAYLOAD_TOO_LARGE')
        expect(refused.headers.connection).toBeUndefined()
      }
      const me = await h2Request(session, '/v1/auth/me', { headers: { authorization: auth } })
      expect(me.status).toBe(200)
    } finally {
      session.close()
    }
  })

  it('a plain-HTTP request to the TLS port gets no HTTP answer', async () => {
    const seen: string[] = []
    const onError = (error: NodeJS.ErrnoException) => seen.push(error.code ?? '')
    server.testApp.app.server.on('tlsClientError', onError)
    try {
      await expect(plainRequest(`http://127.0.0.1:${port}/healthz`)).rejects.toMatchObject({
        code: 'ECONNRESET',
      })
      // The server saw an HTTP request where a TLS handshake belongs, and closed.
      expect(seen).toContain('ERR_SSL_HTTP_REQUEST')
    } finally {
      server.testApp.app.server.off('tlsClientError', onError)
    }
  })

  it('refuses a TLS 1.1 handshake (its own alert), and takes TLS 1.2 from the same client', async () => {
    const seen: string[] = []
    const onError = (error: NodeJS.ErrnoException) => seen.push(error.code ?? '')
    server.testApp.app.server.on('tlsClientError', onError)
    // A client able to speak TLS 1.0 to 1.2 (OpenSSL's level 0 lets it offer the old ones).
    const client = { ca: pki.ca.cert, minVersion: 'TLSv1', ciphers: 'DEFAULT@SECLEVEL=0' } as const
    try {
      const old = await handshake(port, { ...client, maxVersion: 'TLSv1.1' })
      // The client offered TLS 1.1 and received the server's protocol_version alert (70):
      // the refusal is the server's, not a client unable to offer 1.1.
      expect(old).toMatchObject({ ok: false, code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' })
      expect(seen).toContain('ERR_SSL_UNSUPPORTED_PROTOCOL')
      const tls12 = await handshake(port, { ...client, maxVersion: 'TLSv1.2' })
      expect(tls12).toMatchObject({ ok: true, protocol: 'TLSv1.2' })
      // With no limit, the best both speak.
      expect(await handshake(port, { ca: pki.ca.cert })).toMatchObject({
        ok: true,
        protocol: 'TLSv1.3',
      })
    } finally {
      server.testApp.app.server.off('tlsClientError', onError)
    }
  })

  it('refuses a client-initiated TLS 1.2 renegotiation (a handshake’s CPU on demand; HTTP/2 forbids it)', async () => {
    expect(await renegotiation(pki, port)).toBe('ERR_SSL_NO_RENEGOTIATION')
  })

  it('a client that trusts another CA refuses the certificate', async () => {
    const result = await handshake(port, { ca: pki.foreignCa.cert })
    expect(result).toMatchObject({ ok: false, code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' })
  })

  it('HSTS on every answer: a 404, the OpenAPI document, a router error', async () => {
    for (const path of ['/no/such/route', '/openapi.json', '/healthz', '/v1/vaults/%E0%A4%A']) {
      const res = await httpsRequest(pki, `${server.url}${path}`)
      expect(res.headers['strict-transport-security'], path).toBe(YEAR)
    }
  })
})

describe('the TLS 1.2 floor is Coffer’s own', () => {
  it('holds where Node’s default floor was lowered (node --tls-min-v1.0, NODE_OPTIONS)', async () => {
    const nodeDefault = tls.DEFAULT_MIN_VERSION
    let server: TestServer | undefined
    try {
      tls.DEFAULT_MIN_VERSION = 'TLSv1'
      server = await startTestServer({ tls: await materialOf(pki.leaf) })
    } finally {
      tls.DEFAULT_MIN_VERSION = nodeDefault
    }
    try {
      const old = await handshake(portOf(server), {
        ca: pki.ca.cert,
        minVersion: 'TLSv1',
        maxVersion: 'TLSv1.1',
        ciphers: 'DEFAULT@SECLEVEL=0',
      })
      // The server's protocol_version alert: refused for its version, not for want of a cipher.
      expect(old).toMatchObject({ ok: false, code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' })
    } finally {
      await server.close()
    }
  })
})

describe('request metrics over HTTP/2', () => {
  it('counts HTTP/2 requests and the in-flight gauge comes back down', async () => {
    const token = 'metrics-token-0123456789abcdef-0123456789'
    const server = await startTestServer({
      tls: await materialOf(pki.leaf),
      metrics: { metrics: new Metrics(), serve: true, token },
    })
    const session = await h2Connect(pki, server.url)
    try {
      for (let i = 0; i < 3; i++) expect((await h2Request(session, '/healthz')).status).toBe(200)
      // A stream the client resets before its answer: still counted out of flight.
      const reset = session.request({ ':path': '/readyz' })
      reset.close()
      await new Promise((r) => reset.once('close', r))
      const scrape = await h2Request(session, '/metrics', {
        headers: { authorization: `Bearer ${token}` },
      })
      const lines = text(scrape).split('\n')
      expect(lines).toContain(
        'coffer_http_requests_total{listener="api",method="GET",route="/healthz",status="200"} 3',
      )
      expect(lines).toContain('coffer_http_requests_in_flight{listener="api"} 1')
    } finally {
      session.close()
      await server.close()
    }
  })
})

describe('HSTS max-age (COFFER_HSTS_MAX_AGE_SECONDS)', () => {
  it.each([0, 63_072_000])('sends max-age=%i as configured', async (maxAge) => {
    const server = await startTestServer({
      tls: await materialOf(pki.leaf),
      hstsMaxAgeSeconds: maxAge,
    })
    try {
      const res = await httpsRequest(pki, `${server.url}/healthz`)
      expect(res.headers['strict-transport-security']).toBe(`max-age=${maxAge}`)
    } finally {
      await server.close()
    }
  })
})

describe('HSTS on plain HTTP', () => {
  it('only when a trusted proxy says it terminated TLS (X-Forwarded-Proto: https)', async () => {
    const behindProxy = await startTestServer({ trustProxy: ['127.0.0.1'] })
    const direct = await startTestServer()
    try {
      const proto = (p: string) => ({ 'x-forwarded-proto': p })
      const viaProxy = await plainRequest(`${behindProxy.url}/healthz`, proto('https'))
      expect(viaProxy.headers['strict-transport-security']).toBe(YEAR)
      // The proxy's own entry is the last one: what a client wrote before it does not count.
      const appended = await plainRequest(`${behindProxy.url}/healthz`, proto('https, http'))
      expect(appended.headers['strict-transport-security']).toBeUndefined()
      const clear = await plainRequest(`${behindProxy.url}/healthz`, proto('http'))
      expect(clear.headers['strict-transport-security']).toBeUndefined()
      expect(
        (await plainRequest(`${behindProxy.url}/healthz`)).headers['strict-transport-security'],
      ).toBeUndefined()
      // Without COFFER_TRUST_PROXY the header is anyone's to write: ignored.
      const spoofed = await plainRequest(`${direct.url}/healthz`, proto('https'))
      expect(spoofed.status).toBe(200)
      expect(spoofed.headers['strict-transport-security']).toBeUndefined()
    } finally {
      await behindProxy.close()
      await direct.close()
    }
  })

  it('a proxy that is not the trusted one is not believed', async () => {
    const server = await startTestServer({ trustProxy: ['10.9.9.9'] })
    try {
      const res = await plainRequest(`${server.url}/healthz`, { 'x-forwarded-proto': 'https' })
      expect(res.headers['strict-transport-security']).toBeUndefined()
    } finally {
      await server.close()
    }
  })
})

describe('client certificates (COFFER_TLS_CLIENT_CA_FILE, COFFER_TLS_CLIENT_AUTH)', () => {
  const me = (server: TestServer, client?: Issued) =>
    httpsRequest(pki, `${server.url}/v1/auth/me`, {
      headers: { authorization: basic(server.admin.api_key) },
      ...(client ? { cert: client.cert, key: client.key } : {}),
    })

  it('require: no certificate and a foreign one fail the handshake; the CA’s passes', async () => {
    const server = await startTestServer({ tls: await materialOf(pki.leaf, 'require') })
    try {
      await expect(me(server)).rejects.toMatchObject({
        code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      })
      await expect(me(server, pki.foreignClient)).rejects.toThrow()
      // Over TLS 1.2 too (the refusal comes during the handshake there).
      const noCert12 = await handshake(portOf(server), { ca: pki.ca.cert, maxVersion: 'TLSv1.2' })
      expect(noCert12).toMatchObject({ ok: false })
      const good = await me(server, pki.client)
      expect(good.status).toBe(200)
      expect(json(good).user.id).toBe(server.admin.userId)
      // HTTP/2 with the client certificate as well.
      const good12 = await handshake(portOf(server), {
        ca: pki.ca.cert,
        cert: pki.client.cert,
        key: pki.client.key,
        ALPNProtocols: ['h2'],
      })
      expect(good12).toMatchObject({ ok: true, alpn: 'h2' })
    } finally {
      await server.close()
    }
  })

  it('optional: no certificate and the CA’s pass; a foreign one is refused', async () => {
    const server = await startTestServer({ tls: await materialOf(pki.leaf, 'optional') })
    try {
      expect((await me(server)).status).toBe(200)
      expect((await me(server, pki.client)).status).toBe(200)
      await expect(me(server, pki.foreignClient)).rejects.toThrow()
    } finally {
      await server.close()
    }
  })
})

describe('consent API over TLS', () => {
  let consent: ConsentTestApp
  let base: string

  afterAll(() => consent?.close())

  it('serves its own pair over HTTPS and HTTP/2, with HSTS', async () => {
    consent = await buildConsentTestApp({ tls: await materialOf(pki.consentLeaf) })
    await consent.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = consent.app.server.address() as AddressInfo
    base = `https://127.0.0.1:${port}`
    const served = await handshake(port, { ca: pki.ca.cert })
    expect(served.ok && served.certificate.fingerprint256).toBe(fingerprintOf(pki.consentLeaf.cert))

    const query = new URLSearchParams(emailQuery('tls@example.com'))
    const h1 = await httpsRequest(pki, `${base}${CONSENT}?${query}`)
    expect(h1.status, text(h1)).toBe(200)
    expect(h1.headers['strict-transport-security']).toBe(YEAR)
    expect(json(h1).jwt).toEqual(expect.any(String))

    const session = await h2Connect(pki, base)
    try {
      expect(session.alpnProtocol).toBe('h2')
      const h2 = await h2Request(session, `${CONSENT}?${query}`)
      expect(h2.status).toBe(200)
      expect(json(h2).isExisting).toBe(true)
      expect(h2.headers['strict-transport-security']).toBe(YEAR)
      const write = await h2Request(session, CONSENT, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jwt: json(h1).jwt, consentAnalytics: true }),
      })
      expect(write.status, text(write)).toBe(200)
      expect(json(write).consentAnalytics).toBe(true)
      // The consent API's own error body, over TLS.
      const missing = await h2Request(session, '/nowhere')
      expect(missing.status).toBe(404)
      expect(json(missing)).toEqual({ error: 'Not found' })
      expect(missing.headers['strict-transport-security']).toBe(YEAR)
    } finally {
      session.close()
    }
  })
})
