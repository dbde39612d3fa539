import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { basicHeader } from '../helpers/app.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from '../helpers/processes.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Issue 12, point 1: PostgreSQL connections that die (pg_terminate_backend stands for a
 * failover, idle_session_timeout or a firewall) are replaced; the process lives, requests in
 * flight answer 503 DATABASE_UNAVAILABLE, later ones succeed. Only this file's own backends are
 * terminated, found by their application_name: other test files share the server.
 */
async function terminateBackends(applicationName: string): Promise<number> {
  const client = new pg.Client({ connectionString: TEST_PG_URL })
  await client.connect()
  try {
    // Two statements: in one, the planner may call pg_terminate_backend before the filters.
    const { rows } = await client.query<{ pid: number }>(
      'select pid from pg_stat_activity where application_name = $1 and pid <> pg_backend_pid()',
      [applicationName],
    )
    const pids = rows.map((r) => r.pid)
    if (pids.length > 0)
      await client.query('select pg_terminate_backend(p) from unnest($1::int[]) p', [pids])
    return pids.length
  } finally {
    await client.end()
  }
}

async function call(base: string, auth: string, method = 'GET', path = '/v1/vaults') {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: basicHeader(auth),
      ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
    },
    ...(method === 'POST' ? { body: new URLSearchParams({ name: `v-${randomUUID()}` }) } : {}),
    signal: AbortSignal.timeout(15_000),
  })
  const body = (await res.json()) as { result: string; error?: { code: string; type: string } }
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body }
}

describe.skipIf(testDialect !== 'postgres')('terminated PostgreSQL backends (in process)', () => {
  let server: TestServer
  let appName: string

  beforeAll(async () => {
    server = await startTestServer()
    const { rows } = await sql<{
      name: string
    }>`select current_setting('application_name') as name`.execute(server.testApp.deps.store.db)
    appName = rows[0]?.name as string
    expect(appName).toMatch(/^coffer_test_/)
  })
  afterAll(async () => server?.close())

  it('replaces idle connections that were terminated and keeps serving', async () => {
    const auth = server.admin.api_key
    // Several connections open and idle in the pool.
    await Promise.all(Array.from({ length: 5 }, () => call(server.url, auth)))
    expect(await terminateBackends(appName)).toBeGreaterThan(0)
    await sleep(300)
    for (let i = 0; i < 5; i++) {
      const res = await call(server.url, auth)
      expect(res.status).toBe(200)
    }
  })

  it('answers 503 DATABASE_UNAVAILABLE (never 500) to requests on killed connections under load', async () => {
    const auth = server.admin.api_key
    const results: Awaited<ReturnType<typeof call>>[] = []
    let stop = false
    const load = (async () => {
      for (let round = 0; round < 40 && !stop; round++) {
        const batch = Array.from({ length: 10 }, (_, i) =>
          call(server.url, auth, i % 2 === 0 ? 'POST' : 'GET'),
        )
        results.push(...(await Promise.all(batch)))
      }
    })()
    let killed = 0
    for (let i = 0; i < 6; i++) {
      await sleep(60)
      killed += await terminateBackends(appName)
    }
    stop = true
    await load
    expect(killed).toBeGreaterThan(0)
    for (const r of results) {
      if (r.status === 200) continue
      expect(r.status).toBe(503)
      expect(r.body.result).toBe('error')
      expect(r.body.error).toMatchObject({
        code: 'DATABASE_UNAVAILABLE',
        type: 'service_unavailable',
      })
      expect(r.retryAfter).toBe('1')
    }
    // After the faults, every request succeeds again.
    for (let i = 0; i < 5; i++) expect((await call(server.url, auth)).status).toBe(200)
  })
})

describe.skipIf(testDialect !== 'postgres')('terminated PostgreSQL backends (coffer serve)', () => {
  let db: SharedDatabase
  let server: ServerProcess | undefined
  const appName = `coffer_proc_faults_${randomUUID().slice(0, 8)}`
  // Trust authentication ignores it: it stands for a real password, which must never be logged.
  const password = `pw-${randomUUID()}`

  beforeAll(async () => {
    db = await sharedDatabase()
  })
  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  it('lives through terminated backends, idle and under load, and logs no password', async () => {
    const dir = db.dataDir()
    const env = db.env(dir)
    const url = new URL(env.COFFER_DATABASE_URL as string)
    url.password = password
    url.searchParams.set('application_name', appName)
    server = await startServerProcess({ ...env, COFFER_DATABASE_URL: url.toString() })
    const auth = bootstrapCredentials(dir).api_key
    await Promise.all(Array.from({ length: 4 }, () => call(server?.url as string, auth)))

    expect(await terminateBackends(appName)).toBeGreaterThan(0)
    await sleep(300)
    expect(server.child.exitCode).toBeNull()
    expect((await call(server.url, auth)).status).toBe(200)

    const statuses: number[] = []
    const load = Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        await sleep(i * 10)
        statuses.push((await call(server?.url as string, auth, 'POST')).status)
      }),
    )
    for (let i = 0; i < 4; i++) {
      await sleep(50)
      await terminateBackends(appName)
    }
    await load
    expect(statuses.every((s) => s === 200 || s === 503)).toBe(true)
    await sleep(200)
    expect(server.child.exitCode).toBeNull()
    expect((await call(server.url, auth)).status).toBe(200)
    expect(server.output()).toContain('database connection lost')
    expect(server.output()).not.toContain(password)
  }, 60_000)
})
