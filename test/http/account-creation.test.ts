import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { bootstrapFirstAccount } from '../../src/modules/accounts/bootstrap.js'
import { migrateToLatest } from '../../src/store/migrate.js'
import { migrations } from '../../src/store/migrations/index.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import { migratorOf } from '../helpers/migrator.js'
import { testDialect } from '../helpers/store.js'

/** Every table a new account writes to. */
const ACCOUNT_TABLES = [
  'accounts',
  'bootstrap',
  'users',
  'groups',
  'group_members',
  'credentials',
  'data_keys',
  'user_schemas',
  'search_index',
] as const

async function rowCounts(t: TestApp): Promise<Record<string, number>> {
  const counts: Record<string, number> = {}
  for (const table of ACCOUNT_TABLES) {
    const row = await t.deps.store.db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
    counts[table] = Number(row.n)
  }
  return counts
}

describe(`account creation is one transaction (${testDialect})`, () => {
  let t: TestApp
  let dataDir: string
  beforeEach(async () => {
    t = await buildTestApp()
    dataDir = mkdtempSync(join(tmpdir(), 'coffer-bootstrap-'))
  })
  afterEach(async () => {
    vi.restoreAllMocks()
    await t.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('leaves no row at all when its last step fails', async () => {
    const before = await rowCounts(t)
    const replaceApiKey = t.deps.credentials.replaceApiKey.bind(t.deps.credentials)
    // The last step: the admin's API key is written, then it fails. Everything must go.
    vi.spyOn(t.deps.credentials, 'replaceApiKey').mockImplementation(async (...args) => {
      await replaceApiKey(...args)
      throw new Error('injected failure after the admin user was inserted')
    })
    await expect(t.deps.accounts.createWithAdmin()).rejects.toThrow(/injected failure/)
    expect(await rowCounts(t)).toEqual(before)
  })

  it('first start on a database that has an account (`account create`) creates nothing', async () => {
    const before = await rowCounts(t)
    expect(await bootstrapFirstAccount(t.deps.accounts, dataDir)).toEqual({
      created: false,
      reason: 'already-bootstrapped',
    })
    expect(await rowCounts(t)).toEqual(before)
    expect(readdirSync(dataDir)).toEqual([])
  })

  it('a failed first start leaves no rows and no credentials file, and the next one works', async () => {
    // Empty the database as a fresh install would be.
    await emptyDatabase(t)
    const replaceApiKey = t.deps.credentials.replaceApiKey.bind(t.deps.credentials)
    const spy = vi
      .spyOn(t.deps.credentials, 'replaceApiKey')
      .mockImplementationOnce(async (...a) => {
        await replaceApiKey(...a)
        throw new Error('injected failure')
      })
    await expect(bootstrapFirstAccount(t.deps.accounts, dataDir)).rejects.toThrow(/injected/)
    expect(Object.values(await rowCounts(t)).every((n) => n === 0)).toBe(true)
    expect(readdirSync(dataDir)).toEqual([])
    spy.mockRestore()
    const outcome = await bootstrapFirstAccount(t.deps.accounts, dataDir)
    expect(outcome.created).toBe(true)
    expect(readdirSync(dataDir)).toEqual(['bootstrap-credentials.json'])
    expect((await rowCounts(t)).accounts).toBe(1)
  })

  it('an upgraded database bootstrapped by the previous release is not bootstrapped again', async () => {
    // Back to the schema of the release before the singleton row; the test app's account stays.
    const names = Object.keys(migrations)
    const previous = names[names.indexOf('0010_bootstrap') - 1] as string
    const result = await (await migratorOf(t.deps.store.db)).migrateTo(previous)
    expect(result.error).toBeUndefined()
    await migrateToLatest(t.deps.store.db)
    const row = await t.deps.store.db.selectFrom('bootstrap').selectAll().executeTakeFirst()
    expect(row?.account_id).toBe(t.admin.account_id)
    const before = await rowCounts(t)
    expect((await bootstrapFirstAccount(t.deps.accounts, dataDir)).created).toBe(false)
    expect(await rowCounts(t)).toEqual(before)
    expect(readdirSync(dataDir)).toEqual([])
  })
})

async function emptyDatabase(t: TestApp): Promise<void> {
  const db = t.deps.store.db
  // Children first (foreign keys).
  for (const table of [
    'search_index',
    'group_members',
    'credentials',
    'users',
    'groups',
    'user_schemas',
    'data_keys',
    'bootstrap',
  ] as const)
    await db.deleteFrom(table).execute()
  await db.deleteFrom('login_throttle').execute()
  await db.deleteFrom('accounts').execute()
}
