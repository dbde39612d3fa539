import { type Kysely, sql } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * A singleton row saying "this database has its first account". Nodes starting together on an
 * empty database each try to insert it in the transaction that creates the account; the primary
 * key lets exactly one of them commit, so exactly one account is bootstrapped. A database that
 * already has an account (bootstrapped by an earlier release, or given one by `coffer account
 * create`) gets the row now, naming its oldest account, so an upgrade never bootstraps again.
 */
export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('bootstrap')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await sql`insert into bootstrap (id, account_id, created_at)
    select 'first-account', id, created_at from accounts order by created_at, id limit 1`.execute(
    db,
  )
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('bootstrap').execute()
}
