import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { b64, basicHeader } from '../helpers/app.js'
import { insertSchema } from '../helpers/search-fixtures.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { openTestSqliteFile, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Issue 12, point 2: a request whose database work runs past COFFER_REQUEST_TIMEOUT_MS answers
 * 503 in the envelope and leaves nothing half-written; a database locked by another process
 * answers 503, not 500. Over real sockets: the waits are real.
 */
const FIELDS: SchemaField[] = [{ name: 'name', type: 'string', index: true }]

async function post(server: TestServer, path: string, form: Record<string, string>) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: basicHeader(server.admin.api_key),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams(form),
    // Without a deadline the request would wait on the lock: fail the test instead of hanging.
    signal: AbortSignal.timeout(10_000),
  })
  const body = (await res.json()) as { result: string; error?: { code: string; type: string } }
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body }
}

describe.skipIf(testDialect !== 'postgres')('request deadline (PostgreSQL)', () => {
  let server: TestServer
  let vault: string
  let schemaId: string
  beforeAll(async () => {
    server = await startTestServer({
      deadlines: { requestTimeoutMs: 500, blobUploadTimeoutMs: 600_000 },
    })
    const t = server.testApp
    const v = await t.api.post('/v1/vaults', {
      auth: t.admin.api_key,
      form: { name: `v-${randomUUID()}` },
    })
    vault = v.json().vault.id
    schemaId = (await insertSchema(t, t.admin.account_id, vault, FIELDS)).id
  })
  afterAll(async () => server?.close())

  it('answers 503 REQUEST_TIMEOUT and rolls back a write that waits past it', async () => {
    const db = server.testApp.deps.store.db
    const { rows } = await sql<{ s: string }>`select current_schema() as s`.execute(db)
    // Another session holds the schema's row: the document is inserted, then its transaction
    // waits to lock the schema (documents.service #lockSchema) until the deadline.
    const holder = new pg.Client({ connectionString: TEST_PG_URL })
    await holder.connect()
    await holder.query('begin')
    await holder.query(`select 1 from "${rows[0]?.s}".schemas where id = $1 for update`, [schemaId])
    try {
      const started = Date.now()
      const res = await post(server, `/v1/vaults/${vault}/documents`, {
        document: b64({ name: 'late' }),
        schema_id: schemaId,
      })
      expect(res.status).toBe(503)
      expect(res.body.result).toBe('error')
      expect(res.body.error).toMatchObject({ code: 'REQUEST_TIMEOUT', type: 'service_unavailable' })
      expect(res.retryAfter).toBe('1')
      expect(Date.now() - started).toBeLessThan(5000)
    } finally {
      await holder.query('rollback')
      await holder.end()
    }
    const documents = await db
      .selectFrom('documents')
      .select('id')
      .where('vault_id', '=', vault)
      .execute()
    expect(documents).toEqual([])
    // Within its deadline the same write succeeds.
    const ok = await post(server, `/v1/vaults/${vault}/documents`, {
      document: b64({ name: 'on time' }),
      schema_id: schemaId,
    })
    expect(ok.status).toBe(200)
  })
})

describe.skipIf(testDialect !== 'sqlite')('database locked by another process (SQLite)', () => {
  let server: TestServer
  let dir: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'coffer-deadline-'))
    server = await startTestServer({
      sqliteFile: join(dir, 'coffer.db'),
      sqliteBusyTimeoutMs: 300,
      deadlines: { requestTimeoutMs: 200, blobUploadTimeoutMs: 600_000 },
    })
  })
  afterAll(async () => {
    await server?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('answers 503 with Retry-After, writes nothing, and serves once the lock is gone', async () => {
    const other = openTestSqliteFile(join(dir, 'coffer.db'))
    other.exec('begin immediate')
    const name = `v-${randomUUID()}`
    try {
      const res = await post(server, '/v1/vaults', { name })
      expect(res.status).toBe(503)
      expect(res.body.result).toBe('error')
      expect(res.body.error?.type).toBe('service_unavailable')
      expect(res.retryAfter).toBe('1')
    } finally {
      other.exec('rollback')
      other.close()
    }
    const db = server.testApp.deps.store.db
    expect(await db.selectFrom('vaults').select('id').where('name', '=', name).execute()).toEqual(
      [],
    )
    expect((await post(server, '/v1/vaults', { name })).status).toBe(200)
  })
})

// PostgreSQL only: on SQLite no request deadline is installed (http/request-deadline.ts).
describe.skipIf(testDialect !== 'postgres')('BLOB upload deadline (PostgreSQL)', () => {
  let server: TestServer
  let vault: string
  beforeAll(async () => {
    server = await startTestServer({
      deadlines: { requestTimeoutMs: 300, blobUploadTimeoutMs: 600_000 },
    })
    const t = server.testApp
    const v = await t.api.post('/v1/vaults', {
      auth: t.admin.api_key,
      form: { name: `v-${randomUUID()}` },
    })
    vault = v.json().vault.id
  })
  afterAll(async () => server?.close())

  it('lets an upload whose body arrives slower than COFFER_REQUEST_TIMEOUT_MS finish', async () => {
    const boundary = `----coffer${randomUUID()}`
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n`
    const tail = `slow bytes\r\n--${boundary}--\r\n`
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${server.url}/v1/vaults/${vault}/blobs`, {
        method: 'POST',
        headers: {
          authorization: basicHeader(server.admin.api_key),
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': Buffer.byteLength(head) + Buffer.byteLength(tail),
        },
      })
      req.on('response', (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.write(head)
      // The rest of the body comes after the ordinary deadline has passed.
      setTimeout(() => req.end(tail), 700)
    })
    expect(status).toBe(200)
  })
})
