import {
  type Kysely,
  type MigrationResultSet,
  Migrator,
  PostgresAdapter,
  SqliteAdapter,
  sql,
} from 'kysely'
import { migrations } from './migrations/index.js'
import type { Database } from './schema.js'

/**
 * On PostgreSQL the migration tables are pinned to the current schema (the first of the
 * search_path). Unpinned, Kysely takes a migration table in *any* schema of the server as its
 * own, so stores in sibling schemas (test files running in parallel) break each other's migrations.
 */
async function migrator(db: Kysely<Database>): Promise<Migrator> {
  const schema =
    db.getExecutor().adapter instanceof PostgresAdapter
      ? (await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db))
          .rows[0]?.schema
      : undefined
  return new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  })
}

function check(result: MigrationResultSet): void {
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')
    throw new Error(`migration ${failed?.migrationName ?? '?'} failed`, { cause: result.error })
  }
}

/**
 * Kysely looks for its migration tables by listing the tables of *every* schema on PostgreSQL; a
 * schema dropped meanwhile by someone else (another tenant's teardown, a parallel test file)
 * fails that listing with `invalid_schema_name`. Nothing was migrated then: it is safe to retry.
 */
function droppedMidListing(error: unknown): boolean {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | undefined
  return e?.code === '3F000' || e?.cause?.code === '3F000'
}

/**
 * Kysely takes no migration lock on SQLite and runs its migrations outside any transaction
 * there: processes starting together on one file each read "nothing migrated yet" and trip over
 * each other's tables. So on SQLite the whole run is one `BEGIN IMMEDIATE` transaction: it takes
 * the file's write lock before reading the migration state, the others wait for it (busy_timeout)
 * and then find the work done, and a crash mid-way leaves the schema as it was.
 */
async function migrateSqlite(
  db: Kysely<Database>,
  run: (m: Migrator) => Promise<MigrationResultSet>,
): Promise<MigrationResultSet> {
  return db.connection().execute(async (conn) => {
    await sql`begin immediate`.execute(conn)
    try {
      const result = await run(await migrator(conn))
      await sql`${sql.raw(result.error ? 'rollback' : 'commit')}`.execute(conn)
      return result
    } catch (error) {
      await sql`rollback`.execute(conn).catch(() => {})
      throw error
    }
  })
}

/** Another process held the SQLite write lock past busy_timeout (it is migrating): wait again. */
function busyOnSqlite(error: unknown): boolean {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | undefined
  return e?.code === 'SQLITE_BUSY' || e?.cause?.code === 'SQLITE_BUSY'
}

/** How many times a start waits out another process's migration (busy_timeout each). */
const SQLITE_BUSY_ATTEMPTS = 12

/** Brings the schema up to date; safe to call on every start, by several processes at once. */
export function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  return migrateWith(db, (m) => m.migrateToLatest())
}

/**
 * Brings the schema to exactly `name` (a backup's schema version: its rows go in at the version
 * they were read at, and later migrations then run over them as over any older database).
 */
export function migrateTo(db: Kysely<Database>, name: string): Promise<string[]> {
  return migrateWith(db, (m) => m.migrateTo(name))
}

async function migrateWith(
  db: Kysely<Database>,
  run: (m: Migrator) => Promise<MigrationResultSet>,
): Promise<string[]> {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter
  for (let attempt = 1; ; attempt++) {
    try {
      const result = sqlite ? await migrateSqlite(db, run) : await run(await migrator(db))
      check(result)
      return (result.results ?? []).map((r) => r.migrationName)
    } catch (error) {
      const retry = sqlite
        ? attempt < SQLITE_BUSY_ATTEMPTS && busyOnSqlite(error)
        : attempt < 3 && droppedMidListing(error)
      if (!retry) throw error
    }
  }
}

export async function migrateDownAll(db: Kysely<Database>): Promise<void> {
  const m = await migrator(db)
  for (;;) {
    const result = await m.migrateDown()
    check(result)
    if (!result.results?.length) return
  }
}

/** Names of the known migrations not yet applied to this database (readiness probe). */
export async function pendingMigrations(db: Kysely<Database>): Promise<string[]> {
  const known = await (await migrator(db)).getMigrations()
  return known.filter((m) => m.executedAt === undefined).map((m) => m.name)
}
