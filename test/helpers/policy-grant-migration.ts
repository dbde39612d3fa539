import type { Migrator } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FULL_ACCESS_POLICY } from '../../src/modules/accounts/accounts.service.js'
import type { Store } from '../../src/store/db.js'
import { migratorOf } from './migrator.js'
import { openTestStore, testDialect } from './store.js'

/**
 * A migration that grants a new resource to bootstrap admin groups: a group still holding, byte
 * for byte, the full-access policy without `withheld` (the resources of this migration and of
 * later ones, which migrateToLatest also runs) gains them — exactly the policy new accounts get;
 * an edited group is left as it is. Down undoes it.
 */
export function describePolicyGrantMigration(spec: {
  /** e.g. `0023`. */
  migration: string
  /** The migration just before it, which the groups are written under. */
  before: string
  /** The resource this migration grants. */
  grants: string
  /** What the new accounts' policy holds that the groups do not yet (this grant and later ones). */
  withheld: readonly string[]
  /** Distinct per test file (ids end with it). */
  idTag: string
}): void {
  const before = FULL_ACCESS_POLICY.map((s) => ({
    ...s,
    Resources: s.Resources.filter((r) => !spec.withheld.includes(r)),
  }))
  const edited = [{ ...before[0], Activities: 'R' }]
  const account = `0190f3a0-0000-7000-8000-0000000acc${spec.idTag}`
  const full = `0190f3a0-0000-7000-8000-00000000a${spec.idTag}1`
  const editedId = `0190f3a0-0000-7000-8000-00000000a${spec.idTag}2`
  let store: Store
  let migrator: Migrator

  const policyOf = (id: string) => groupPolicy(store, id)

  beforeAll(async () => {
    store = await openTestStore()
    migrator = await migratorOf(store.db)
    const down = await migrator.migrateTo(spec.before)
    if (down.error) throw down.error
    await insertAccountGroups(store, account, [
      [full, 'FULL_ADMIN', before],
      [editedId, 'edited admin', edited],
    ])
  })
  afterAll(() => store.close())

  describe(`migration ${spec.migration} (${testDialect})`, () => {
    it(`gives untouched full-access groups ${spec.grants}, new accounts’ policy exactly`, async () => {
      const up = await migrator.migrateToLatest()
      expect(up.error).toBeUndefined()
      expect(await policyOf(full)).toEqual(FULL_ACCESS_POLICY)
      expect(await policyOf(editedId)).toEqual(edited)
    })

    it('down takes the grant back', async () => {
      const down = await migrator.migrateTo(spec.before)
      expect(down.error).toBeUndefined()
      expect(await policyOf(full)).toEqual(before)
      expect(await policyOf(editedId)).toEqual(edited)
      const up = await migrator.migrateToLatest()
      expect(up.error).toBeUndefined()
    })
  })
}

/** A group's stored policy, parsed. */
export async function groupPolicy(store: Store, id: string): Promise<unknown> {
  const row = await store.db
    .selectFrom('groups')
    .select('policy')
    .where('id', '=', id)
    .executeTakeFirstOrThrow()
  return JSON.parse(row.policy)
}

/** An account and its groups (id, name, policy), written straight to the tables. */
export async function insertAccountGroups(
  store: Store,
  account: string,
  groups: readonly (readonly [id: string, name: string, policy: unknown])[],
): Promise<void> {
  const at = '2030-01-01T00:00:00.000Z'
  await store.db.insertInto('accounts').values({ id: account, created_at: at }).execute()
  for (const [id, name, policy] of groups)
    await store.db
      .insertInto('groups')
      .values({
        account_id: account,
        id,
        name,
        policy: JSON.stringify(policy),
        created_at: at,
        updated_at: at,
      })
      .execute()
}
