import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * Scheduled backups (COFFER_BACKUP_SCHEDULE) in a cluster: every node runs the schedule, and one
 * row per schedule decides which node takes each slot. A node claims a slot by moving `slot`
 * forward while no other node holds an unexpired lease (`holder`, `lease_until`), renews the
 * lease while it works, and records the outcome; the other nodes read the outcome for their
 * metrics. A reference table: a row or two, no account.
 */
export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('backup_schedule')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('slot', 'text', (c) => c.notNull())
    .addColumn('holder', 'text')
    .addColumn('lease_until', 'text')
    .addColumn('last_success_at', 'text')
    .addColumn('last_size', 'bigint')
    .addColumn('last_target', 'text')
    .addColumn('last_failure_at', 'text')
    .addColumn('last_error', 'text')
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('backup_schedule').execute()
}
