import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { openStore, type Store } from '../src/store/db.js'
import { migrations } from '../src/store/migrations/index.js'
import { migratorOf } from './helpers/migrator.js'
import {
  PLACEMENTS,
  readSchema,
  shardRuleViolations,
  type TableShape,
} from './helpers/shard-rule.js'
import { TEST_PG_URL, testDialect } from './helpers/store.js'

/**
 * The shard rule (test/helpers/shard-rule.ts) against the live schema of this engine: the
 * current one keeps it; the schema of the release before migration 0012 broke it exactly where
 * issue 12 said, and 0012's down migration brings those breaks back.
 */

const stores: Store[] = []
const schemas: string[] = []

/** An empty store, not migrated (PostgreSQL: a fresh schema, dropped at the end). */
function openEmpty(): Store {
  if (testDialect === 'sqlite') {
    const store = openStore({ url: ':memory:' })
    stores.push(store)
    return store
  }
  const schema = `coffer_shard_${randomBytes(6).toString('hex')}`
  schemas.push(schema)
  const store = openStore({ url: TEST_PG_URL, pgSchema: schema, pg: { poolSize: 2 } })
  stores.push(store)
  return store
}

async function createSchemaFor(store: Store): Promise<void> {
  if (store.dialect !== 'postgres') return
  const admin = new pg.Client({ connectionString: TEST_PG_URL })
  await admin.connect()
  await admin.query(`create schema ${schemas[schemas.length - 1]}`)
  await admin.end()
}

async function storeAt(migration: string): Promise<Store> {
  const store = openEmpty()
  await createSchemaFor(store)
  const result = await (await migratorOf(store.db)).migrateTo(migration)
  if (result.error) throw result.error
  return store
}

const LATEST = Object.keys(migrations).at(-1) as string

/** What the schema of migrations 0001–0011 breaks (issue 12, point 8). */
const BEFORE_0012 = [
  'credentials: primary key (digest) does not lead with account_id',
  'login_throttle: has no account_id column',
  'login_throttle: primary key (key) does not lead with account_id',
  'scoped_access_tokens: unique index scoped_access_tokens_id (id) does not lead with account_id',
]

afterAll(async () => {
  for (const store of stores) await store.close()
  if (schemas.length === 0) return
  const admin = new pg.Client({ connectionString: TEST_PG_URL })
  await admin.connect()
  for (const s of schemas) await admin.query(`drop schema if exists ${s} cascade`)
  await admin.end()
})

describe(`shard rule on the live schema (${testDialect})`, () => {
  it('holds for every table of the current schema, and every named exception exists', async () => {
    const store = await storeAt(LATEST)
    const tables = await readSchema(store.db)
    expect(shardRuleViolations(tables)).toEqual([])
    const names = tables.map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(Object.keys(PLACEMENTS)))
    // The reader sees what it checks: a tenant table's keys, unique indexes and foreign keys.
    const documents = tables.find((t) => t.name === 'documents') as TableShape
    expect(documents.primaryKey).toEqual(['account_id', 'vault_id', 'id'])
    expect(documents.foreignKeys).toContainEqual({
      columns: ['account_id', 'vault_id', 'schema_id'],
      refTable: 'schemas',
      refColumns: ['account_id', 'vault_id', 'id'],
    })
    const users = tables.find((t) => t.name === 'users') as TableShape
    expect(users.uniques).toEqual([
      { name: 'users_live_username', columns: ['account_id', 'username'] },
    ])
    const schemasTable = tables.find((t) => t.name === 'schemas') as TableShape
    expect(schemasTable.uniques).toContainEqual({
      name: 'schemas_name_unique',
      columns: ['account_id', 'vault_id', null],
    })
  })

  it('fails the schema as it was before migration 0012, naming each table and what is wrong', async () => {
    const store = await storeAt('0011_login_in_flight')
    expect(shardRuleViolations(await readSchema(store.db))).toEqual(BEFORE_0012)
  })

  it('0012 down brings those breaks back, and up again removes them', async () => {
    const store = await storeAt('0012_shard_ready_keys')
    const m = await migratorOf(store.db)
    const down = await m.migrateDown()
    expect(down.error).toBeUndefined()
    expect(shardRuleViolations(await readSchema(store.db))).toEqual(BEFORE_0012)
    const up = await m.migrateToLatest()
    expect(up.error).toBeUndefined()
    expect(shardRuleViolations(await readSchema(store.db))).toEqual([])
  })
})

describe('shard rule (pure)', () => {
  const table = (t: Partial<TableShape> & { name: string }): TableShape => ({
    columns: ['account_id', 'id'],
    primaryKey: ['account_id', 'id'],
    uniques: [],
    foreignKeys: [],
    ...t,
  })

  it('names a foreign key that does not carry account_id onto its target', () => {
    const problems = shardRuleViolations([
      table({ name: 'parents' }),
      table({
        name: 'children',
        columns: ['account_id', 'id', 'parent_id'],
        foreignKeys: [{ columns: ['parent_id'], refTable: 'parents', refColumns: ['id'] }],
      }),
      table({
        name: 'swapped',
        columns: ['account_id', 'id', 'parent_id'],
        foreignKeys: [
          {
            columns: ['account_id', 'parent_id'],
            refTable: 'parents',
            refColumns: ['id', 'account_id'],
          },
        ],
      }),
    ])
    expect(problems).toEqual([
      'children: foreign key (parent_id) → parents (id) does not carry account_id onto parents.account_id',
      'swapped: foreign key (account_id, parent_id) → parents (id, account_id) does not carry account_id onto parents.account_id',
    ])
  })

  it('lets a foreign key point at a reference table, but not a reference table at a tenant one', () => {
    expect(
      shardRuleViolations([
        table({ name: 'users' }),
        table({
          name: 'bootstrap',
          columns: ['id', 'account_id'],
          primaryKey: ['id'],
          foreignKeys: [{ columns: ['account_id'], refTable: 'users', refColumns: ['id'] }],
        }),
        table({
          name: 'notes',
          foreignKeys: [{ columns: ['id'], refTable: 'bootstrap', refColumns: ['id'] }],
        }),
      ]),
    ).toEqual(['bootstrap: reference table with a foreign key to distributed table users'])
  })

  it('names a table without a primary key, and an exception by its own column', () => {
    expect(
      shardRuleViolations([
        table({ name: 'loose', primaryKey: [] }),
        table({ name: 'credential_directory' }),
      ]),
    ).toEqual([
      'loose: has no primary key',
      'credential_directory: has no digest column',
      'credential_directory: primary key (account_id, id) does not lead with digest',
    ])
  })
})
