import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { basicHeader } from '../helpers/app.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
  waitForOutput,
} from '../helpers/processes.js'

interface Answer {
  status: number
  connection: string | undefined
  body: string
}

/**
 * One request on a new connection of its own (no agent, no pooling): what a balancer that
 * opens a connection per request sees. Rejects with the socket error (ECONNREFUSED once closed).
 */
function freshRequest(
  base: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, base),
      { method: options.method ?? 'GET', headers: options.headers, agent: false },
      (res) => {
        let body = ''
        res.on('data', (chunk) => {
          body += chunk
        })
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }),
        )
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(options.body)
  })
}

async function refusedAt(base: string): Promise<number> {
  for (let i = 0; i < 400; i++) {
    try {
      await freshRequest(base, '/healthz')
    } catch (e) {
      const code = (e as { code?: string }).code
      // A connection accepted in the instant the listener closes is reset with it: poll again,
      // the next one must be refused.
      if (code !== 'ECONNRESET') {
        expect(code).toBe('ECONNREFUSED')
        return Date.now()
      }
    }
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error('the listener never closed')
}

const DELAY_MS = 3000

describe('coffer serve: COFFER_SHUTDOWN_DELAY_MS (drain behind a load balancer)', () => {
  let db: SharedDatabase
  let server: ServerProcess
  let auth: string

  beforeAll(async () => {
    db = await sharedDatabase()
    const dir = db.dataDir()
    server = await startServerProcess({
      ...db.env(dir),
      COFFER_SHUTDOWN_DELAY_MS: String(DELAY_MS),
      COFFER_SHUTDOWN_GRACE_MS: '10000',
    })
    auth = basicHeader(bootstrapCredentials(dir).api_key)
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  it('answers /readyz 503 but accepts and serves new requests, then closes and exits 0', async () => {
    const exited = new Promise<number | null>((r) => server.child.once('exit', (code) => r(code)))
    const signalled = Date.now()
    server.child.kill('SIGTERM')
    await waitForOutput(server, /shutting down/)

    const ready = await freshRequest(server.url, '/readyz')
    expect(ready.status).toBe(503)
    expect(JSON.parse(ready.body).error).toMatchObject({
      code: 'NOT_READY',
      message: 'Not ready: shutting_down',
    })
    // The process answers: liveness stays 200, so the orchestrator does not kill it early.
    expect((await freshRequest(server.url, '/healthz')).status).toBe(200)

    // Ordinary requests, each on a new connection: accepted and served, told to reconnect.
    const me = await freshRequest(server.url, '/v1/auth/me', { headers: { authorization: auth } })
    expect(me.status).toBe(200)
    expect(me.connection).toBe('close')
    const form = 'name=made-while-draining'
    const created = await freshRequest(server.url, '/v1/vaults', {
      method: 'POST',
      headers: {
        authorization: auth,
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': String(form.length),
      },
      body: form,
    })
    expect(created.status).toBe(200)
    expect(JSON.parse(created.body)).toMatchObject({
      result: 'success',
      vault: { name: 'made-while-draining' },
    })
    expect(Date.now() - signalled).toBeLessThan(DELAY_MS)

    // Then the listener stops accepting, not before the delay, and the process exits 0.
    const closedAt = await refusedAt(server.url)
    expect(closedAt - signalled).toBeGreaterThanOrEqual(DELAY_MS - 100)
    expect(await exited).toBe(0)
    expect(server.output()).toMatch(/drain delay over: closing the listeners/)
  }, 60_000)
})

describe('coffer serve: a second signal during the drain delay', () => {
  let db: SharedDatabase
  let server: ServerProcess

  beforeAll(async () => {
    db = await sharedDatabase()
    server = await startServerProcess({
      ...db.env(db.dataDir()),
      COFFER_SHUTDOWN_DELAY_MS: '60000',
    })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  it('exits 1 at once instead of waiting out the delay', async () => {
    const exited = new Promise<number | null>((r) => server.child.once('exit', (code) => r(code)))
    server.child.kill('SIGTERM')
    await waitForOutput(server, /shutting down/)
    // Still serving: the first signal only started the delay.
    expect((await freshRequest(server.url, '/healthz')).status).toBe(200)
    const second = Date.now()
    server.child.kill('SIGTERM')
    expect(await exited).toBe(1)
    expect(Date.now() - second).toBeLessThan(5000)
  }, 60_000)
})
