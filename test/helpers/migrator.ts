import { type Kysely, Migrator, PostgresAdapter, sql } from 'kysely'
import { migrations } from '../../src/store/migrations/index.js'
import type { Database } from '../../src/store/schema.js'

/** A migrator over the project's migrations, on the test's own PostgreSQL schema when there is one. */
export async function migratorOf(db: Kysely<Database>): Promise<Migrator> {
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
