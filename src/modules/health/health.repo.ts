import { type Kysely, sql } from 'kysely'
import type { Database } from '../../store/schema.js'

/** The cheapest statement that proves a connection and the server answer. */
export async function pingDatabase(db: Kysely<Database>): Promise<void> {
  await sql`select 1`.execute(db)
}

export { pendingMigrations } from '../../store/migrate.js'
