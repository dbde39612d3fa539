import { type Kysely, Migrator, PostgresAdapter, sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FULL_ACCESS_POLICY } from '../src/modules/accounts/accounts.service.js'
import type { Store } from '../src/store/db.js'
import { migrations } from '../src/store/migrations/index.js'
import type { Database } from '../src/store/schema.js'
import { openTestStore, testDialect } from './helpers/store.js'

/**
 * Migration 0023 (backup status, issue 22): a group still holding, byte for byte, the
 * full-access policy of bootstrap admin groups as 0017 left it gains `Backups::` — exactly the
 * policy new accounts get; an edited group is left as it is. Down undoes it.
 */
const BEFORE = FULL_ACCESS_POLICY.map((s) => ({
  ...s,
  Resources: s.Resources.filter((r) => r !== 'Backups::'),
}))
const EDITED = [{ ...BEFORE[0], Activities: 'R' }]
const ACCOUNT = '0190f3a0-0000-7000-8000-0000000acc23'
const FULL = '0190f3a0-0000-7000-8000-00000000a231'
const EDITED_ID = '0190f3a0-0000-7000-8000-00000000a232'
const BEFORE_0023 = '0022_backup_schedule'

let store: Store
let migrator: Migrator

async function migratorOf(db: Kysely<Database>): Promise<Migrator> {
  const schema =
    db.getExecutor().adapter instanceof PostgresAdapter
      ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]?.s
      : undefined
  return new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  })
}

const policyOf = async (id: string) =>
  JSON.parse(
    (
      await store.db
        .selectFrom('groups')
        .select('policy')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
    ).policy,
  )

beforeAll(async () => {
  store = await openTestStore()
  migrator = await migratorOf(store.db)
  const down = await migrator.migrateTo(BEFORE_0023)
  if (down.error) throw down.error
  const at = '2030-01-01T00:00:00.000Z'
  await store.db.insertInto('accounts').values({ id: ACCOUNT, created_at: at }).execute()
  for (const [id, name, policy] of [
    [FULL, 'FULL_ADMIN', BEFORE],
    [EDITED_ID, 'edited admin', EDITED],
  ] as const)
    await store.db
      .insertInto('groups')
      .values({
        account_id: ACCOUNT,
        id,
        name,
        policy: JSON.stringify(policy),
        created_at: at,
        updated_at: at,
      })
      .execute()
})
afterAll(() => store.close())

describe(`migration 0023 (${testDialect})`, () => {
  it('gives untouched full-access groups Backups::, new accounts’ policy exactly', async () => {
    const up = await migrator.migrateToLatest()
    expect(up.error).toBeUndefined()
    expect(await policyOf(FULL)).toEqual(FULL_ACCESS_POLICY)
    expect(await policyOf(EDITED_ID)).toEqual(EDITED)
  })

  it('down takes the grant back', async () => {
    const down = await migrator.migrateTo(BEFORE_0023)
    expect(down.error).toBeUndefined()
    expect(await policyOf(FULL)).toEqual(BEFORE)
    expect(await policyOf(EDITED_ID)).toEqual(EDITED)
    const up = await migrator.migrateToLatest()
    expect(up.error).toBeUndefined()
  })
})
