import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { appendToChains, type Exec } from '../../src/audit/chain.js'
import { verifyChains } from '../../src/audit/verify.js'
import { AuditWriter } from '../../src/audit/writer.js'
import { openStore, type Store } from '../../src/store/db.js'
import { auditEvent } from '../helpers/audit-event.js'
import { openTestStore, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * The group commit's chain heads (issue 13): the head moves under a writer — another writer
 * (another node's pool on PostgreSQL; on SQLite a second writer on the same store), a write's
 * own append — and several writers append to one account at once: every event lands exactly
 * once, numbered without a gap, and the chain verifies.
 */
let a: Store
let b: Store
const ACCOUNT = '01a00000-0000-7000-8000-0000000000cc'
const OTHER = '01a00000-0000-7000-8000-0000000000dd'
const event = (accountId = ACCOUNT) => auditEvent(accountId)

beforeAll(async () => {
  a = await openTestStore()
  b =
    testDialect === 'postgres'
      ? openStore({
          url: TEST_PG_URL,
          pgSchema: (await sql<{ s: string }>`select current_schema() as s`.execute(a.db)).rows[0]
            ?.s as string,
          pg: { poolSize: 4 },
        })
      : a
})
afterAll(async () => {
  if (b !== a) await b.close()
  await a.close()
})

const seqs = async (accountId: string) =>
  (
    await a.db
      .selectFrom('audit_events')
      .select(['seq', 'transaction_id'])
      .where('account_id', '=', accountId)
      .orderBy('seq')
      .execute()
  ).map((r) => ({ seq: Number(r.seq), tx: r.transaction_id }))

const batch = (writer: AuditWriter, k: number, accountId = ACCOUNT) =>
  Promise.all(Array.from({ length: k }, () => writer.append(event(accountId))))

describe('group commit chain heads', () => {
  it('a head moved by another writer or by a write is found again; nothing lost or doubled', async () => {
    const one = new AuditWriter(a.db, a.dialect)
    const two = new AuditWriter(b.db, b.dialect)
    await batch(one, 3)
    await batch(one, 2)
    // Another node appends: `one`'s prediction is now behind.
    await batch(two, 4)
    await batch(one, 2)
    // A request's write carries its own event (store/auditing-driver.ts: appendToChains).
    await a.db.transaction().execute(async (trx) => {
      const exec: Exec = async (text, params) =>
        (await sql.raw(interpolate(text, params)).execute(trx)).rows as Record<string, unknown>[]
      await appendToChains(exec, a.dialect, [event()])
    })
    await batch(one, 2, OTHER)
    await batch(one, 3)
    await batch(two, 1)
    const rows = await seqs(ACCOUNT)
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1))
    expect(new Set(rows.map((r) => r.tx)).size).toBe(16)
    expect((await seqs(OTHER)).map((r) => r.seq)).toEqual([1, 2])
    const report = await verifyChains(a.db)
    expect(report.problems).toEqual([])
  })

  it.skipIf(testDialect !== 'postgres')(
    'PostgreSQL: a node appends after the head it predicts in one statement, and takes the lock when the head moved',
    async () => {
      const one = new AuditWriter(a.db, a.dialect)
      const two = new AuditWriter(b.db, b.dialect)
      await batch(one, 2) // no prediction yet: the lock
      expect(one.appendPaths).toEqual({ predicted: 0, locked: 1 })
      await batch(one, 3)
      await batch(one, 1)
      expect(one.appendPaths).toEqual({ predicted: 2, locked: 1 })
      await batch(two, 2) // the head moves under `one`
      const before = (await seqs(ACCOUNT)).length
      await batch(one, 2)
      // The predicted statement wrote nothing; the locked path appended after the real head.
      expect(one.appendPaths).toEqual({ predicted: 2, locked: 2 })
      expect((await seqs(ACCOUNT)).length).toBe(before + 2)
      // Batches queued while another is stored: each predicted after the one before.
      const inFlight: Promise<unknown>[] = []
      for (const k of [3, 2, 4]) {
        inFlight.push(batch(one, k))
        await new Promise((r) => setImmediate(r))
      }
      await Promise.all(inFlight)
      // (One flush at a time: batches queued while one is stored go together.)
      expect(one.appendPaths.locked).toBe(2)
      expect(one.appendPaths.predicted).toBeGreaterThanOrEqual(4)
      const rows = await seqs(ACCOUNT)
      expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: rows.length }, (_, i) => i + 1))
      expect((await verifyChains(a.db, ACCOUNT)).problems).toEqual([])
    },
  )

  it('several writers on one account at once, many batches each: one gapless chain', async () => {
    const writers = [a, b, a, b].map((s) => new AuditWriter(s.db, s.dialect))
    const before = (await seqs(ACCOUNT)).length
    await Promise.all(
      writers.map(async (w) => {
        for (let i = 0; i < 15; i++) await batch(w, 1 + (i % 5))
      }),
    )
    const rows = await seqs(ACCOUNT)
    const added = 4 * (3 * (1 + 2 + 3 + 4 + 5))
    expect(rows.length).toBe(before + added)
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: rows.length }, (_, i) => i + 1))
    expect(new Set(rows.map((r) => r.tx)).size).toBe(rows.length)
    expect((await verifyChains(a.db, ACCOUNT)).problems).toEqual([])
  })
})

/** `?` / `$n` placeholders → literals (test only: the values are our own). */
function interpolate(text: string, params: readonly unknown[]): string {
  const lit = (v: unknown) =>
    v === null ? 'null' : typeof v === 'number' ? String(v) : `'${String(v).replace(/'/g, "''")}'`
  let i = 0
  return text.replace(/\$(\d+)|\?/g, (_, d) => lit(params[d ? Number(d) - 1 : i++]))
}
