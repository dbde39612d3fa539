import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AuditEventInput } from '../../src/audit/event.js'
import { pruneAudit } from '../../src/audit/retention.js'
import { type VerifyReport, verifyChains } from '../../src/audit/verify.js'
import { AuditWriter } from '../../src/audit/writer.js'
import { openStore, type Store } from '../../src/store/db.js'
import { auditEvent } from '../helpers/audit-event.js'
import { openTestSqliteStore, openTestStore, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * `coffer audit verify` against the retention pruner at the same time (issue 13): two store
 * handles on one database — two connections to one SQLite file, two pools on PostgreSQL — one
 * pruning a day at a time, the other verifying over and over. Verify reads one snapshot (heads
 * and events together), so it never reports the events the pruner just deleted as missing.
 * Read as heads first, events after (separate queries), it did: "removed" at the old anchor.
 */
const DAY = 86_400_000
/** Day 0 of the seeded chain (a UTC midnight long past). */
const T0 = Date.UTC(2020, 0, 1)
const DAYS = 6
/** Several of verify's 1,000-row pages per chain: the walk takes many queries. */
const PER_DAY = 1200
const ACCOUNT = '01a00000-0000-7000-8000-00000000abcd'

const folder = mkdtempSync(join(tmpdir(), 'coffer-audit-race-'))
let pruning: Store
let verifying: Store

/** The i-th seeded event: PER_DAY a day from T0, one a second. */
function event(i: number): AuditEventInput {
  const day = Math.floor(i / PER_DAY)
  return {
    ...auditEvent(ACCOUNT),
    at: new Date(T0 + day * DAY + (i % PER_DAY) * 1000).toISOString(),
  }
}

beforeAll(async () => {
  pruning = await openTestStore(
    testDialect === 'sqlite' ? { sqliteFile: join(folder, 'coffer.db') } : {},
  )
  verifying =
    testDialect === 'postgres'
      ? openStore({
          url: TEST_PG_URL,
          pgSchema: (await sql<{ s: string }>`select current_schema() as s`.execute(pruning.db))
            .rows[0]?.s as string,
          pg: { poolSize: 2 },
        })
      : openTestSqliteStore(join(folder, 'coffer.db'))
  const writer = new AuditWriter(pruning.db, pruning.dialect)
  // A batch at a time: the chain's order is the events' time order (the PostgreSQL group
  // commit's concurrent flushes could place a later batch first).
  for (let from = 0; from < DAYS * PER_DAY; from += 200) {
    await Promise.all(Array.from({ length: 200 }, (_, i) => writer.append(event(from + i))))
  }
}, 60_000)

afterAll(async () => {
  await verifying?.close()
  await pruning?.close()
  rmSync(folder, { recursive: true, force: true })
})

describe('audit verify beside the retention pruner', () => {
  it('never reports a false finding while whole days are pruned under it', async () => {
    const before = await verifyChains(verifying.db, ACCOUNT)
    expect(before).toMatchObject({ events: DAYS * PER_DAY, problems: [] })
    let done = false
    const reports: VerifyReport[] = []
    const verifier = (async () => {
      while (!done) reports.push(await verifyChains(verifying.db, ACCOUNT))
    })()
    const pruned: number[] = []
    try {
      for (let day = 0; day < DAYS; day++) {
        // One more verify started right before each pass, beside the loop's: the two overlap.
        const paired = verifyChains(verifying.db, ACCOUNT)
        // `now` two days after the day: with a retention of one day, that day is past it.
        const result = await pruneAudit(
          pruning.db,
          pruning.dialect,
          new Date(T0 + (day + 2) * DAY),
          1,
        )
        expect(result.refused).toEqual([])
        pruned.push(result.pruned[ACCOUNT] ?? 0)
        reports.push(await paired)
      }
    } finally {
      done = true
      await verifier
    }
    // Every day went, one pass each, while verify ran the whole time.
    expect(pruned).toEqual(Array.from({ length: DAYS }, () => PER_DAY))
    for (const report of reports) expect(report.problems).toEqual([])
    // Each report saw the chain as it stood between two passes: whole days, never a part.
    for (const report of reports) expect(report.events % PER_DAY).toBe(0)
  }, 120_000)
})
