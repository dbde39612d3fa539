import type { Migrator } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { claimSlot, scheduleState } from '../src/modules/backup/backup-schedule.repo.js'
import type { Store } from '../src/store/db.js'
import { logicalDump } from './helpers/db-dump.js'
import { migratorOf } from './helpers/migrator.js'
import { openTestStore } from './helpers/store.js'

/**
 * Migration 0022 (scheduled backups' row, issue 22 part 2) on a database of the release before
 * it: every row stays as it was, the new table is there and empty, a slot can be claimed; down
 * removes it and nothing else.
 */
const BEFORE_0022 = '0019_master_key_fingerprint'
const ACCOUNT = '0190f3a0-0000-7000-8000-0000000acc22'

let store: Store
let migrator: Migrator

/** The dump without the migration bookkeeping and the new table. */
const dataOf = async () =>
  (await logicalDump(store))
    .split('\n')
    .filter((l) => !l.startsWith('kysely_') && !l.startsWith('backup_schedule'))
    .sort()
    .join('\n')

beforeAll(async () => {
  store = await openTestStore()
  migrator = await migratorOf(store.db)
  const down = await migrator.migrateTo(BEFORE_0022)
  if (down.error) throw down.error
  await store.db
    .insertInto('accounts')
    .values({ id: ACCOUNT, created_at: '2030-01-01T00:00:00.000Z' })
    .execute()
})

afterAll(async () => {
  await store?.close()
})

describe('migration 0022', () => {
  it('adds the schedule row table, keeps every row, and goes down cleanly', async () => {
    const before = await dataOf()
    const up = await migrator.migrateToLatest()
    expect(up.error).toBeUndefined()
    expect(up.results?.map((r) => r.migrationName)).toContain('0022_backup_schedule')
    expect(await dataOf()).toBe(before)
    expect(await scheduleState(store.db)).toBeUndefined()
    const claim = {
      slot: '2031-01-01T00:00:00.000Z',
      holder: 'node',
      now: '2031-01-01T00:00:00.000Z',
      leaseUntil: '2031-01-01T00:02:00.000Z',
    }
    expect(await claimSlot(store.db, claim)).toBe(true)
    expect(await claimSlot(store.db, { ...claim, holder: 'other' })).toBe(false)
    expect(await scheduleState(store.db)).toMatchObject({
      slot: claim.slot,
      holder: 'node',
      failures: 0,
    })
    const down = await migrator.migrateTo(BEFORE_0022)
    expect(down.error).toBeUndefined()
    expect(await dataOf()).toBe(before)
    const again = await migrator.migrateToLatest()
    expect(again.error).toBeUndefined()
  })
})
