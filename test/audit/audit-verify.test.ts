import { type Kysely, sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyChains } from '../../src/audit/verify.js'
import type { Database } from '../../src/store/schema.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * The chain check on both engines (the CLI test runs it on SQLite files): a changed, a
 * reordered and a removed event are each found, with their place. PostgreSQL: the tampering
 * goes past the append-only trigger, as an intruder with the table owner's rights could.
 */
let t: TestApp
beforeAll(async () => {
  t = await buildTestApp()
  for (let i = 0; i < 6; i++) await t.api.get('/v1/vaults', { auth: t.admin.api_key })
})
afterAll(() => t.close())

async function tamper(fn: (db: Kysely<Database>) => Promise<void>): Promise<void> {
  const db = t.deps.store.db
  if (t.deps.store.dialect === 'sqlite') return fn(db)
  await db.transaction().execute(async (trx) => {
    await sql`alter table audit_events disable trigger audit_events_append_only`.execute(trx)
    await fn(trx)
    await sql`alter table audit_events enable trigger audit_events_append_only`.execute(trx)
  })
}

const problemsOf = async () => (await verifyChains(t.deps.store.db, t.admin.account_id)).problems

describe('verifyChains', () => {
  it('finds a changed, a reordered and a removed event', async () => {
    const account = t.admin.account_id
    expect(await problemsOf()).toEqual([])
    const setSeq = (from: number, to: number) => (db: Kysely<Database>) =>
      db
        .updateTable('audit_events')
        .set({ seq: to })
        .where('account_id', '=', account)
        .where('seq', '=', from)
        .execute()
        .then(() => undefined)

    await tamper((db) =>
      db
        .updateTable('audit_events')
        .set({ client_ip: '10.9.9.9' })
        .where('account_id', '=', account)
        .where('seq', '=', 2)
        .execute()
        .then(() => undefined),
    )
    expect(await problemsOf()).toEqual([expect.objectContaining({ seq: 2, problem: 'changed' })])

    const swap = async (db: Kysely<Database>) => {
      await setSeq(4, -1)(db)
      await setSeq(5, 4)(db)
      await setSeq(-1, 5)(db)
    }
    await tamper(swap)
    expect(await problemsOf()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ seq: 4, problem: 'reordered' }),
        expect.objectContaining({ seq: 5, problem: 'reordered' }),
      ]),
    )
    await tamper(swap)

    await tamper((db) =>
      db
        .deleteFrom('audit_events')
        .where('account_id', '=', account)
        .where('seq', '=', 6)
        .execute()
        .then(() => undefined),
    )
    expect(await problemsOf()).toEqual(
      expect.arrayContaining([expect.objectContaining({ seq: 6, problem: 'removed' })]),
    )
  })
})
