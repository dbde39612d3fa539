import { type Kysely, type MigrationResultSet, Migrator, PostgresAdapter, sql } from 'kysely'
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

/** Brings the schema up to date; safe to call on every start. */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await (await migrator(db)).migrateToLatest()
      check(result)
      return (result.results ?? []).map((r) => r.migrationName)
    } catch (error) {
      if (attempt >= 3 || !droppedMidListing(error)) throw error
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
