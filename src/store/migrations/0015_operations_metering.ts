import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * Operations metering (issue 13, part 3): `operation_counts` holds one counter per account, UTC
 * day (`YYYY-MM-DD`) and billing category, raised by an upsert with increment, so every node
 * adds to the same row atomically. Keyed by the account first (the shard rule). The account's
 * optional daily quota is a new setting (`account_settings.daily_operations_quota`, null: none).
 * No policy is changed: usage is read under `Account::<id>::Settings` (R), which 0013 granted.
 */
export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('operation_counts')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('operation_counts_pk', ['account_id', 'day', 'category'])
    .addForeignKeyConstraint('operation_counts_account_fk', ['account_id'], 'accounts', ['id'])
    .execute()
  await db.schema
    .alterTable('account_settings')
    .addColumn('daily_operations_quota', 'bigint')
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('account_settings').dropColumn('daily_operations_quota').execute()
  await db.schema.dropTable('operation_counts').execute()
}
