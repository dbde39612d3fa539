import { createHash, randomBytes } from 'node:crypto'
import { resolve } from 'node:path'
import SQLite from 'better-sqlite3-multiple-ciphers'
import pg from 'pg'
import { openStore, type Store } from '../../src/store/db.js'
import { migrateToLatest } from '../../src/store/migrate.js'
import { applySqliteKey } from '../../src/store/sqlite-cipher.js'

/** `TEST_DATABASE=postgres` runs the same suite on a real PostgreSQL server. */
export const testDialect = process.env.TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite'
export const TEST_PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/**
 * The file key of a SQLite file a test process makes itself (not through `coffer`, which keeps
 * it in a key file beside the database): fixed per path, so every connection a test opens on
 * the file — stores, second nodes, raw connections — agrees without passing it around.
 */
export function testSqliteKey(file: string): Buffer {
  return createHash('sha256')
    .update(`coffer test sqlite key\n${resolve(file)}`)
    .digest()
}

/** A store on a test's own SQLite file, encrypted as production files are (not migrated). */
export function openTestSqliteStore(
  file: string,
  options: Omit<Parameters<typeof openStore>[0], 'url' | 'sqliteKey'> = {},
): Store {
  return openStore({ ...options, url: file, sqliteKey: testSqliteKey(file) })
}

/** A raw connection to a test's own SQLite file (another session, a tamperer, a reader). */
export function openTestSqliteFile(file: string, options: SQLite.Options = {}): SQLite.Database {
  const db = new SQLite(file, options)
  applySqliteKey(db, testSqliteKey(file), file)
  return db
}

/**
 * A migrated, empty store: in-memory SQLite (or this file: tests that read the bytes on disk), or
 * a fresh schema on the PostgreSQL server (dropped on close), so test files never see each
 * other's rows.
 */
export async function openTestStore(
  options: {
    sqliteFile?: string
    sqliteBusyTimeoutMs?: number
    /** SQLite file: search worker threads (default the production count) and their module. */
    sqliteReadWorkers?: number
    sqliteReadWorkerUrl?: URL
  } = {},
): Promise<Store> {
  if (testDialect === 'sqlite') {
    const store = openStore({
      url: options.sqliteFile ?? ':memory:',
      ...(options.sqliteFile ? { sqliteKey: testSqliteKey(options.sqliteFile) } : {}),
      ...(options.sqliteReadWorkers !== undefined
        ? { sqliteReadWorkers: options.sqliteReadWorkers }
        : {}),
      ...(options.sqliteReadWorkerUrl ? { sqliteReadWorkerUrl: options.sqliteReadWorkerUrl } : {}),
      ...(options.sqliteBusyTimeoutMs !== undefined
        ? { sqliteBusyTimeoutMs: options.sqliteBusyTimeoutMs }
        : {}),
    })
    await migrateToLatest(store.db)
    return store
  }
  const schema = `coffer_test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: TEST_PG_URL })
  await admin.connect()
  await admin.query(`create schema ${schema}`)
  await admin.end()
  const store = openStore({
    url: TEST_PG_URL,
    pgSchema: schema,
    // Tests find (and terminate) their own backends by it: the suite shares one server.
    pgApplicationName: schema,
    pg: { poolSize: 5 },
  })
  const close = async () => {
    await store.close()
    const c = new pg.Client({ connectionString: TEST_PG_URL })
    await c.connect()
    await c.query(`drop schema if exists ${schema} cascade`)
    await c.end()
  }
  try {
    await migrateToLatest(store.db)
  } catch (e) {
    await close()
    throw e
  }
  return { ...store, close }
}
