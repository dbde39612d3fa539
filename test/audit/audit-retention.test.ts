import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pruneAudit } from '../../src/audit/retention.js'
import { verifyChains } from '../../src/audit/verify.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * Retention (COFFER_AUDIT_RETENTION_DAYS): whole UTC days past it are deleted from a chain that
 * verifies, the last deleted hash becomes the anchor, and verify still passes; a tampered chain
 * is not pruned.
 */
let t: TestApp
beforeAll(async () => {
  t = await buildTestApp()
})
afterAll(() => t.close())

const DAY = 86_400_000
const count = async (accountId: string) =>
  (
    await t.deps.store.db
      .selectFrom('audit_events')
      .select('seq')
      .where('account_id', '=', accountId)
      .execute()
  ).length

describe('audit retention', () => {
  it('keeps the days within retention, prunes whole past days, and verify passes after', async () => {
    const db = t.deps.store.db
    const account = t.admin.account_id
    for (let i = 0; i < 3; i++) await t.api.get('/v1/vaults', { auth: t.admin.api_key })
    const kept = await count(account)
    // Today's events are within a 1-day retention: nothing goes.
    const none = await pruneAudit(db, t.deps.store.dialect, new Date(), 1)
    expect(none.pruned).toEqual({})
    expect(await count(account)).toBe(kept)
    // Three days on, today's whole day is past retention: pruned, anchored, still verifying.
    const later = await pruneAudit(db, t.deps.store.dialect, new Date(Date.now() + 3 * DAY), 1)
    expect(later.pruned[account]).toBe(kept)
    expect(await count(account)).toBe(0)
    const head = await db
      .selectFrom('audit_chain_heads')
      .selectAll()
      .where('account_id', '=', account)
      .executeTakeFirstOrThrow()
    expect(Number(head.anchor_seq)).toBe(Number(head.last_seq))
    expect(head.anchor_hash).toBe(head.last_hash)
    await t.api.get('/v1/vaults', { auth: t.admin.api_key })
    const report = await verifyChains(db)
    expect(report.problems).toEqual([])
    expect(await count(account)).toBe(1)
  })

  it('does not prune a chain that fails verification', async () => {
    const other = await t.newAccount()
    await t.api.get('/v1/vaults', { auth: other.api_key })
    const db = t.deps.store.db
    // Tamper (PostgreSQL: past the append-only trigger, as an intruder with the owner's rights).
    if (t.deps.store.dialect === 'postgres')
      await db.transaction().execute(async (trx) => {
        await sql`alter table audit_events disable trigger audit_events_append_only`.execute(trx)
        await trx
          .updateTable('audit_events')
          .set({ status: 299 })
          .where('account_id', '=', other.account_id)
          .execute()
        await sql`alter table audit_events enable trigger audit_events_append_only`.execute(trx)
      })
    else
      await db
        .updateTable('audit_events')
        .set({ status: 299 })
        .where('account_id', '=', other.account_id)
        .execute()
    const before = await count(other.account_id)
    const result = await pruneAudit(db, t.deps.store.dialect, new Date(Date.now() + 3 * DAY), 1)
    expect(result.refused).toContain(other.account_id)
    expect(await count(other.account_id)).toBe(before)
  })
})
