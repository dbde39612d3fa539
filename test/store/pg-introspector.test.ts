import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../../src/store/db.js'
import { migrateToLatest } from '../../src/store/migrate.js'
import { openTestStore, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Kysely's stock introspector listed every schema on the server, so a migration start failed
 * ("column … does not exist") when another schema changed during that listing. Ours lists the
 * store's own schema only.
 */
describe.skipIf(testDialect !== 'postgres')('PostgreSQL introspection', () => {
  let store: Store
  let admin: pg.Client
  const sibling = `coffer_sibling_${randomBytes(6).toString('hex')}`

  beforeAll(async () => {
    store = await openTestStore()
    admin = new pg.Client({ connectionString: TEST_PG_URL })
    await admin.connect()
    await admin.query(`create schema ${sibling}`)
    await admin.query(`create table ${sibling}.intruder (id int)`)
  })
  afterAll(async () => {
    await admin.query(`drop schema if exists ${sibling} cascade`)
    await admin.end()
    await store.close()
  })

  it('lists the tables of the store schema only, with their columns', async () => {
    const tables = await store.db.introspection.getTables({ withInternalKyselyTables: true })
    const names = tables.map((t) => t.name)
    expect(names).toContain('vaults')
    expect(names).toContain('kysely_migration')
    expect(names).not.toContain('intruder')
    expect(new Set(tables.map((t) => t.schema)).size).toBe(1)
    const vaults = tables.find((t) => t.name === 'vaults')
    expect(vaults?.columns.map((c) => c.name)).toContain('id')
    const withoutInternal = await store.db.introspection.getTables()
    expect(withoutInternal.map((t) => t.name)).not.toContain('kysely_migration')
  })

  it('migrates while another schema adds and drops columns', async () => {
    let stop = false
    const churn = (async () => {
      for (let i = 0; !stop; i++) {
        await admin.query(`alter table ${sibling}.intruder add column c${i} int`)
        await admin.query(`alter table ${sibling}.intruder drop column c${i}`)
      }
    })()
    try {
      for (let i = 0; i < 20; i++) expect(await migrateToLatest(store.db)).toEqual([])
    } finally {
      stop = true
      await churn
    }
  })
})
