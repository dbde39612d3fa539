import { type Kysely, type MigrationResultSet, Migrator } from 'kysely'
import { migrations } from './migrations/index.js'
import type { Database } from './schema.js'

function migrator(db: Kysely<Database>): Migrator {
  return new Migrator({ db, provider: { getMigrations: async () => migrations } })
}

function check(result: MigrationResultSet): void {
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')
    throw new Error(`migration ${failed?.migrationName ?? '?'} failed`, { cause: result.error })
  }
}

/** Brings the schema up to date; safe to call on every start. */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  const result = await migrator(db).migrateToLatest()
  check(result)
  return (result.results ?? []).map((r) => r.migrationName)
}

export async function migrateDownAll(db: Kysely<Database>): Promise<void> {
  const m = migrator(db)
  for (;;) {
    const result = await m.migrateDown()
    check(result)
    if (!result.results?.length) return
  }
}
