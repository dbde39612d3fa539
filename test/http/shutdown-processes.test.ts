import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { basicHeader } from '../helpers/app.js'
import { CONSENT, TEST_CONSENT_SECRET } from '../helpers/consent.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from '../helpers/processes.js'

interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/** Splits what a server wrote on one connection into responses (each has a Content-Length). */
function parseResponses(raw: string): RawResponse[] {
  const out: RawResponse[] = []
  let rest = raw
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n')
    if (end < 0) break
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n')
    const headers: Record<string, string> = {}
    for (const line of lines) {
      const colon = line.indexOf(':')
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
    }
    const length = Number(headers['content-length'] ?? 0)
    const body = Buffer.from(rest.slice(end + 4))
      .subarray(0, length)
      .toString()
    out.push({ status: Number(statusLine?.split(' ')[1]), headers, body })
    rest = rest.slice(end + 4 + body.length)
  }
  return out
}

/** A raw connection: what it received once the server closed it. */
function openRaw(url: string): Promise<{ socket: Socket; closed: Promise<RawResponse[]> }> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      let raw = ''
      socket.on('data', (chunk) => {
        raw += chunk.toString()
      })
      const closed = new Promise<RawResponse[]>((done) => {
        socket.on('close', () => done(parseResponses(raw)))
      })
      resolve({ socket, closed })
    })
    socket.once('error', reject)
  })
}

/** Waits until the process's log matches. */
async function waitFor(server: ServerProcess, pattern: RegExp): Promise<RegExpExecArray> {
  for (let i = 0; i < 200; i++) {
    const m = pattern.exec(server.output())
    if (m) return m
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`not in the log: ${pattern}\n${server.output()}`)
}

/** A new connection during shutdown is refused, or answered 503 in the given body shape. */
async function newRequestRefused(url: string): Promise<string> {
  try {
    const res = await fetch(url)
    expect(res.status).toBe(503)
    return await res.text()
  } catch (e) {
    const code = (e as { cause?: { code?: string } }).cause?.code
    expect(['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET']).toContain(code)
    return 'refused'
  }
}

describe('coffer serve: graceful shutdown on SIGTERM (both listeners)', () => {
  let db: SharedDatabase
  let server: ServerProcess
  let mainUrl: string
  let consentUrl: string
  let apiKey: string

  beforeAll(async () => {
    db = await sharedDatabase()
    const dir = db.dataDir()
    server = await startServerProcess({
      ...db.env(dir),
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
      COFFER_SHUTDOWN_GRACE_MS: '10000',
    })
    mainUrl = server.url
    const line = await waitFor(server, /Consent API listening at (http:\/\/127\.0\.0\.1:\d+)/)
    consentUrl = line[1] as string
    apiKey = bootstrapCredentials(dir).api_key
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  it('finishes in-flight requests, refuses new ones in the envelope, and exits 0', async () => {
    // In flight on each listener: headers sent, body not yet complete.
    const form = 'name=drained-vault'
    const mainSlow = await openRaw(mainUrl)
    mainSlow.socket.write(
      `POST /v1/vaults HTTP/1.1\r\nHost: x\r\nAuthorization: ${basicHeader(apiKey)}\r\n` +
        `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${form.length}\r\n\r\n` +
        form.slice(0, 4),
    )
    const consentBody = JSON.stringify({ jwt: 'not-a-token' })
    const consentSlow = await openRaw(consentUrl)
    consentSlow.socket.write(
      `POST ${CONSENT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${consentBody.length}\r\n\r\n${consentBody.slice(0, 3)}`,
    )
    // Let both servers receive the headers before the signal.
    await new Promise((r) => setTimeout(r, 300))

    const exited = new Promise<number | null>((r) => server.child.once('exit', (code) => r(code)))
    server.child.kill('SIGTERM')
    await waitFor(server, /shutting down/)

    // New connections: refused (or an enveloped 503), never Fastify's plain body.
    const mainNew = await newRequestRefused(`${mainUrl}/v1/auth/me`)
    if (mainNew !== 'refused') expect(JSON.parse(mainNew).result).toBe('error')
    const consentNew = await newRequestRefused(`${consentUrl}/readyz`)
    if (consentNew !== 'refused') expect(JSON.parse(consentNew).error).toBeTypeOf('string')

    // The in-flight requests complete; a request pipelined behind each reaches a closing app
    // and is refused in that app's own error body.
    mainSlow.socket.write(
      `${form.slice(4)}GET /v1/vaults HTTP/1.1\r\nHost: x\r\nAuthorization: ${basicHeader(apiKey)}\r\n\r\n`,
    )
    consentSlow.socket.write(`${consentBody.slice(3)}GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n`)
    const [mainDone, pipelined] = await mainSlow.closed
    expect(mainDone?.status).toBe(200)
    expect(JSON.parse(mainDone?.body ?? '{}')).toMatchObject({
      result: 'success',
      vault: { name: 'drained-vault' },
    })
    expect(pipelined?.status).toBe(503)
    expect(pipelined?.headers.connection).toBe('close')
    expect(pipelined?.headers['retry-after']).toBe('1')
    expect(JSON.parse(pipelined?.body ?? '{}')).toMatchObject({
      result: 'error',
      error: { type: 'service_unavailable', code: 'SHUTTING_DOWN' },
    })

    const [consentDone, consentReady] = await consentSlow.closed
    // The consent request ran to its own answer (its token is not valid): not cut, not a 503.
    expect(consentDone?.status).toBe(400)
    expect(JSON.parse(consentDone?.body ?? '{}').error).toBeTypeOf('string')
    // `/readyz` turned 503 at once, naming why.
    expect(consentReady?.status).toBe(503)
    expect(JSON.parse(consentReady?.body ?? '{}')).toEqual({ error: 'Not ready: shutting_down' })

    expect(await exited).toBe(0)
  }, 60_000)
})

describe('coffer serve: a request still running after COFFER_SHUTDOWN_GRACE_MS', () => {
  let db: SharedDatabase
  let server: ServerProcess
  let apiKey: string

  beforeAll(async () => {
    db = await sharedDatabase()
    const dir = db.dataDir()
    server = await startServerProcess({ ...db.env(dir), COFFER_SHUTDOWN_GRACE_MS: '500' })
    apiKey = bootstrapCredentials(dir).api_key
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  it('has its connection cut; the pool still closes and the process exits 0', async () => {
    const stuck = await openRaw(server.url)
    stuck.socket.write(
      `POST /v1/vaults HTTP/1.1\r\nHost: x\r\nAuthorization: ${basicHeader(apiKey)}\r\n` +
        'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nname=',
    )
    await new Promise((r) => setTimeout(r, 300))
    const exited = new Promise<number | null>((r) => server.child.once('exit', (code) => r(code)))
    const signalled = Date.now()
    server.child.kill('SIGTERM')
    expect(await stuck.closed).toEqual([])
    expect(await exited).toBe(0)
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(450)
    expect(server.output()).toMatch(/requests still running after the grace period: cut/)
  }, 60_000)
})
