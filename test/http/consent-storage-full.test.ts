import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildConsentTestApp, type ConsentTestApp, emailQuery } from '../helpers/consent.js'
import { testDialect } from '../helpers/store.js'

/**
 * Issue 18 on the consent listener: a database with no room left (SQLite's own SQLITE_FULL,
 * made real by capping the file's page count) answers 503 in the consent body, never 500, and
 * serves again once there is room.
 */
describe.runIf(testDialect === 'sqlite')('consent API on a full database (sqlite)', () => {
  let t: ConsentTestApp
  let dir: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'coffer-consent-full-'))
    t = await buildConsentTestApp({ sqlite: { file: join(dir, 'coffer.db'), busyTimeoutMs: 5000 } })
  })
  afterAll(async () => {
    await t?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('answers 503 without a stack, then stores again when there is room', async () => {
    // Fill the last free pages, then cap the file at its size: the next new record needs room.
    const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(t.store.db)
    const pages = Number(rows[0]?.page_count)
    await sql.raw(`pragma max_page_count = ${pages}`).execute(t.store.db)
    let full = false
    for (let i = 0; i < 200 && !full; i++) {
      const res = await t.get(emailQuery(`full-${i}-${Date.now()}@example.com`))
      if (res.statusCode !== 200) {
        expect(res.statusCode, res.body).toBe(503)
        expect(res.json()).toEqual({ error: 'Service temporarily unavailable; try again later' })
        full = true
      }
    }
    expect(full).toBe(true)
    await sql.raw(`pragma max_page_count = ${pages * 100}`).execute(t.store.db)
    const again = await t.get(emailQuery(`room-${Date.now()}@example.com`))
    expect(again.statusCode, again.body).toBe(200)
  })
})
