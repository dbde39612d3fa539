import { randomUUID } from 'node:crypto'
import { request } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { b64, basicHeader } from '../helpers/app.js'
import { insertDocument, insertSchema, type TestSchema } from '../helpers/search-fixtures.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * The time bound and the client-disconnect cancellation of search queries (security review,
 * finding 2), over real sockets. A search is made deterministically slow by holding an
 * ACCESS EXCLUSIVE lock on the store's `documents` table from another session: its statement
 * waits on the lock (which statement_timeout counts) until the lock is released or the
 * statement is cancelled. PostgreSQL only: SQLite runs statements synchronously in-process.
 */
const FIELDS: SchemaField[] = [{ name: 'name', type: 'string', index: true }]

interface Fixture {
  server: TestServer
  vault: string
  schema: TestSchema
  /** `schema.documents` of this store, for the lock. */
  documentsTable: string
}

async function fixture(searchTimeoutMs: number): Promise<Fixture> {
  const server = await startTestServer({ searchTimeoutMs })
  const t = server.testApp
  const v = await t.api.post('/v1/vaults', {
    auth: t.admin.api_key,
    form: { name: `v-${randomUUID()}` },
  })
  const vault = v.json().vault.id as string
  const schema = await insertSchema(t, t.admin.account_id, vault, FIELDS)
  await insertDocument(t, {
    accountId: t.admin.account_id,
    vaultId: vault,
    schema,
    content: { name: 'x' },
  })
  const { rows } = await sql<{ s: string }>`select current_schema() as s`.execute(t.deps.store.db)
  return { server, vault, schema, documentsTable: `"${rows[0]?.s}".documents` }
}

/** Another session holding ACCESS EXCLUSIVE on the table until `release`. */
async function lockTable(table: string) {
  const client = new pg.Client({ connectionString: TEST_PG_URL })
  await client.connect()
  await client.query('begin')
  await client.query(`lock table ${table} in access exclusive mode`)
  return {
    /** Backend pids of sessions waiting for this lock. */
    waiting: async () =>
      (
        await client.query<{ pid: number }>(
          'select pid from pg_locks where relation = $1::regclass and not granted',
          [table],
        )
      ).rows.map((r) => r.pid),
    release: async () => {
      await client.query('rollback')
      await client.end()
    },
  }
}

function searchBody(f: Fixture): string {
  const option = { schema_id: f.schema.id, filter: { name: { type: 'eq', value: 'x' } } }
  return new URLSearchParams({ search_option: b64(option) }).toString()
}

async function until(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return true
    await sleep(50)
  }
  return false
}

describe.skipIf(testDialect !== 'postgres')('search statement bound (PostgreSQL)', () => {
  let bounded: Fixture
  let unbounded: Fixture
  let lock: Awaited<ReturnType<typeof lockTable>> | undefined

  beforeAll(async () => {
    bounded = await fixture(300)
    // The production default would stop the statement itself; this one only stops on cancel.
    unbounded = await fixture(120_000)
  })
  afterEach(async () => {
    await lock?.release()
    lock = undefined
  })
  afterAll(async () => {
    await bounded?.server.close()
    await unbounded?.server.close()
  })

  it('answers 503 SEARCH_TIMEOUT when a statement runs past COFFER_SEARCH_TIMEOUT_MS', async () => {
    lock = await lockTable(bounded.documentsTable)
    const started = Date.now()
    const res = await fetch(`${bounded.server.url}/v1/vaults/${bounded.vault}/search`, {
      method: 'POST',
      headers: {
        authorization: basicHeader(bounded.server.admin.api_key),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: searchBody(bounded),
      // Unbounded, the statement waits for the lock: this fails the test instead of hanging it.
      signal: AbortSignal.timeout(10_000),
    })
    expect(res.status).toBe(503)
    const body = (await res.json()) as { result: string; error: { code: string; type: string } }
    expect(body.result).toBe('error')
    expect(body.error).toMatchObject({ code: 'SEARCH_TIMEOUT', type: 'service_unavailable' })
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(await lock.waiting()).toEqual([])
  })

  it('cancels the running statement when the client disconnects', async () => {
    lock = await lockTable(unbounded.documentsTable)
    const url = new URL(`${unbounded.server.url}/v1/vaults/${unbounded.vault}/search`)
    const body = searchBody(unbounded)
    const req = request(url, {
      method: 'POST',
      headers: {
        authorization: basicHeader(unbounded.server.admin.api_key),
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': Buffer.byteLength(body),
      },
    })
    req.on('error', () => {})
    req.end(body)
    const current = lock
    expect(await until(async () => (await current.waiting()).length > 0, 10_000)).toBe(true)
    req.destroy()
    // The lock is still held: only a cancel ends the waiting statement.
    expect(await until(async () => (await current.waiting()).length === 0, 5_000)).toBe(true)
  })

  // The legacy spelling (issue 11) shares the search route's handler: same bound, same cancel.
  it('bounds and cancels the legacy GET spellings (?search_option=) the same way', async () => {
    lock = await lockTable(bounded.documentsTable)
    const timedOut = await fetch(
      `${bounded.server.url}/v1/vaults/${bounded.vault}/?${searchBody(bounded)}`,
      {
        headers: { authorization: basicHeader(bounded.server.admin.api_key) },
        signal: AbortSignal.timeout(10_000),
      },
    )
    expect(timedOut.status).toBe(503)
    expect(((await timedOut.json()) as { error: { code: string } }).error.code).toBe(
      'SEARCH_TIMEOUT',
    )
    await lock.release()

    lock = await lockTable(unbounded.documentsTable)
    const url = new URL(
      `${unbounded.server.url}/v1/vaults/${unbounded.vault}?${searchBody(unbounded)}`,
    )
    const req = request(url, {
      headers: { authorization: basicHeader(unbounded.server.admin.api_key) },
    })
    req.on('error', () => {})
    req.end()
    const current = lock
    expect(await until(async () => (await current.waiting()).length > 0, 10_000)).toBe(true)
    req.destroy()
    expect(await until(async () => (await current.waiting()).length === 0, 5_000)).toBe(true)
  })
})
