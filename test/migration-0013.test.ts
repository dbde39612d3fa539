import type { Migrator } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FULL_ACCESS_POLICY } from '../src/modules/accounts/accounts.service.js'
import type { Store } from '../src/store/db.js'
import { migratorOf } from './helpers/migrator.js'
import { groupPolicy, insertAccountGroups } from './helpers/policy-grant-migration.js'
import { openTestStore, testDialect } from './helpers/store.js'

/**
 * Migration 0013 (account settings): a group still holding, byte for byte, the full-access policy
 * every bootstrap admin group had gains `Account::.*::Settings` — exactly the policy new accounts
 * get; a group an administrator edited is left as it is. Down undoes both steps.
 */
const BEFORE = FULL_ACCESS_POLICY.map((s) => ({
  ...s,
  // Neither the settings grant (0013) nor the audit (0014), policy simulator (0017) and backup
  // status (0023) grants, also run by migrateToLatest.
  Resources: s.Resources.filter(
    (r) =>
      r !== 'Account::.*::Settings' &&
      r !== 'Audit::' &&
      r !== 'PolicySimulator::' &&
      r !== 'Backups::',
  ),
}))
const EDITED = [{ ...BEFORE[0], Activities: 'R' }]
const ACCOUNT = '0190f3a0-0000-7000-8000-0000000acc01'

let store: Store
let migrator: Migrator

const policyOf = (id: string) => groupPolicy(store, id)

beforeAll(async () => {
  store = await openTestStore()
  migrator = await migratorOf(store.db)
  const down = await migrator.migrateTo('0012_shard_ready_keys')
  if (down.error) throw down.error
  await insertAccountGroups(store, ACCOUNT, [
    ['0190f3a0-0000-7000-8000-00000000a0a1', 'FULL_ADMIN', BEFORE],
    ['0190f3a0-0000-7000-8000-00000000a0a2', 'edited admin', EDITED],
    ['0190f3a0-0000-7000-8000-00000000a0a3', 'copy of the admin', BEFORE],
  ])
})
afterAll(() => store.close())

describe(`migration 0013 (${testDialect})`, () => {
  it('gives untouched full-access groups the settings grant, new accounts’ policy exactly', async () => {
    const up = await migrator.migrateToLatest()
    expect(up.error).toBeUndefined()
    expect(await policyOf('0190f3a0-0000-7000-8000-00000000a0a1')).toEqual(FULL_ACCESS_POLICY)
    expect(await policyOf('0190f3a0-0000-7000-8000-00000000a0a3')).toEqual(FULL_ACCESS_POLICY)
    expect(await policyOf('0190f3a0-0000-7000-8000-00000000a0a2')).toEqual(EDITED)
    const rows = await store.db.selectFrom('account_settings').selectAll().execute()
    expect(rows).toEqual([])
  })

  it('down takes the grant back and drops the table', async () => {
    const down = await migrator.migrateTo('0012_shard_ready_keys')
    expect(down.error).toBeUndefined()
    expect(await policyOf('0190f3a0-0000-7000-8000-00000000a0a1')).toEqual(BEFORE)
    expect(await policyOf('0190f3a0-0000-7000-8000-00000000a0a2')).toEqual(EDITED)
    const up = await migrator.migrateToLatest()
    expect(up.error).toBeUndefined()
  })
})
