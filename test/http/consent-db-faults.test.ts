import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildConsentTestApp, type ConsentTestApp, emailQuery } from '../helpers/consent.js'
import { openTestSqliteFile, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Issue 12, points 1 and 2 on the consent listener: a database that is locked past the
 * deadline (PostgreSQL) or past busy_timeout (SQLite) answers 503 with Retry-After in the
 * consent API's own body, never 500, and the next request succeeds.
 */
describe(`consent API when the database stalls (${testDialect})`, () => {
  let t: ConsentTestApp
  let dir: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'coffer-consent-faults-'))
    t = await buildConsentTestApp({
      sqlite: { file: join(dir, 'coffer.db'), busyTimeoutMs: 300 },
      deadlines: { requestTimeoutMs: 400, blobUploadTimeoutMs: 600_000 },
    })
  })
  afterAll(async () => {
    await t?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Another session or process holds the lock a new consent record needs, until released. */
  async function lockRecords(): Promise<() => Promise<void>> {
    if (testDialect === 'sqlite') {
      const other = openTestSqliteFile(join(dir, 'coffer.db'))
      other.exec('begin immediate')
      return async () => {
        other.exec('rollback')
        other.close()
      }
    }
    const { rows } = await sql<{ s: string }>`select current_schema() as s`.execute(t.store.db)
    const client = new pg.Client({ connectionString: TEST_PG_URL })
    await client.connect()
    await client.query('begin')
    await client.query(`lock table "${rows[0]?.s}".consent_records in access exclusive mode`)
    return async () => {
      await client.query('rollback')
      await client.end()
    }
  }

  it('answers 503 with Retry-After in its own body, then serves again', async () => {
    const query = emailQuery(`stall-${Date.now()}@example.com`)
    const release = await lockRecords()
    try {
      const res = await t.get(query)
      expect(res.statusCode).toBe(503)
      expect(res.headers['retry-after']).toBe('1')
      // PostgreSQL: the request deadline ends the wait and says so; SQLite: the file stayed
      // locked past busy_timeout (a raw driver error: the generic text).
      expect(res.json()).toEqual({
        error:
          testDialect === 'postgres'
            ? expect.stringMatching(/rolled back; try again later$/)
            : 'Service temporarily unavailable; try again shortly',
      })
    } finally {
      await release()
    }
    expect((await t.get(query)).statusCode).toBe(200)
  })
})
