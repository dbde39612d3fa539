import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { b64, basicHeader } from '../helpers/app.js'
import { insertDocument, insertSchema, type TestSchema } from '../helpers/search-fixtures.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Searches cannot starve PostgreSQL's pool (issue 14): at most COFFER_SEARCH_CONCURRENCY run at
 * once per node, COFFER_SEARCH_QUEUE wait, one more is answered 503 SEARCH_BUSY, and other
 * requests still find a connection. Over real sockets; searches are held by another session's
 * ACCESS EXCLUSIVE lock on `search_index` (documents stay readable).
 */
const FIELDS: SchemaField[] = [{ name: 'name', type: 'string', index: true }]

interface Fixture {
  server: TestServer
  vault: string
  schema: TestSchema
  document: string
  table: string
}

async function fixture(pgConcurrency: number, queue: number): Promise<Fixture> {
  const server = await startTestServer({ searchLimits: { pgConcurrency, queue } })
  const t = server.testApp
  const v = await t.api.post('/v1/vaults', {
    auth: t.admin.api_key,
    form: { name: `v-${randomUUID()}` },
  })
  const vault = v.json().vault.id as string
  const schema = await insertSchema(t, t.admin.account_id, vault, FIELDS)
  const document = await insertDocument(t, {
    accountId: t.admin.account_id,
    vaultId: vault,
    schema,
    content: { name: 'x' },
  })
  const { rows } = await sql<{ s: string }>`select current_schema() as s`.execute(t.deps.store.db)
  return { server, vault, schema, document, table: `"${rows[0]?.s}".search_index` }
}

async function lockTable(table: string) {
  const client = new pg.Client({ connectionString: TEST_PG_URL })
  await client.connect()
  await client.query('begin')
  await client.query(`lock table ${table} in access exclusive mode`)
  return {
    release: async () => {
      await client.query('rollback')
      await client.end()
    },
  }
}

function search(f: Fixture) {
  const option = { schema_id: f.schema.id, filter: { name: { type: 'eq', value: 'x' } } }
  return fetch(`${f.server.url}/v1/vaults/${f.vault}/search`, {
    method: 'POST',
    headers: {
      authorization: basicHeader(f.server.admin.api_key),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ search_option: b64(option) }).toString(),
    signal: AbortSignal.timeout(20_000),
  })
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (check()) return true
    await sleep(25)
  }
  return check()
}

describe.skipIf(testDialect !== 'postgres')('searches at once (PostgreSQL)', () => {
  const servers: TestServer[] = []
  let lock: Awaited<ReturnType<typeof lockTable>> | undefined
  afterEach(async () => {
    await lock?.release()
    lock = undefined
  })
  afterAll(async () => {
    for (const s of servers) await s.close()
  })

  it('runs COFFER_SEARCH_CONCURRENCY, queues COFFER_SEARCH_QUEUE, refuses the next with 503 SEARCH_BUSY', async () => {
    const f = await fixture(1, 1)
    servers.push(f.server)
    lock = await lockTable(f.table)
    const running = search(f)
    const queued = search(f)
    const load = () => f.server.testApp.deps.searchReads.load()
    expect(await until(() => load().running === 1 && load().queued === 1, 10_000)).toBe(true)
    const refused = await search(f)
    expect(refused.status).toBe(503)
    const body = (await refused.json()) as { result: string; error: { code: string } }
    expect(body).toMatchObject({ result: 'error', error: { code: 'SEARCH_BUSY' } })
    // The pool still serves other requests while the searches wait on the lock.
    const read = await fetch(`${f.server.url}/v1/vaults/${f.vault}/documents/${f.document}`, {
      headers: { authorization: basicHeader(f.server.admin.api_key) },
      signal: AbortSignal.timeout(10_000),
    })
    expect(read.status).toBe(200)
    await lock.release()
    lock = undefined
    expect((await running).status).toBe(200)
    expect((await queued).status).toBe(200)
    expect(load()).toEqual({ running: 0, queued: 0 })
  })

  it('keeps connections for other requests while every search slot is taken', async () => {
    // The test pool has 5 connections; 4 searches may hold 4 of them at most.
    const f = await fixture(4, 0)
    servers.push(f.server)
    lock = await lockTable(f.table)
    const held = [search(f), search(f), search(f), search(f)]
    const load = () => f.server.testApp.deps.searchReads.load()
    expect(await until(() => load().running === 4, 10_000)).toBe(true)
    expect((await search(f)).status).toBe(503)
    for (let i = 0; i < 3; i++) {
      const read = await fetch(`${f.server.url}/v1/vaults/${f.vault}/documents/${f.document}`, {
        headers: { authorization: basicHeader(f.server.admin.api_key) },
        signal: AbortSignal.timeout(10_000),
      })
      expect(read.status).toBe(200)
    }
    await lock.release()
    lock = undefined
    for (const res of await Promise.all(held)) expect(res.status).toBe(200)
  })
})
