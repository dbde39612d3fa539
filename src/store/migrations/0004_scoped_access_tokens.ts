import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

export async function up(db: Db): Promise<void> {
  // Scoped access tokens. The secret exists only as a digest. `parent_id` is the SAT that minted
  // this one (null when a user did): a SAT is bounded by every ancestor and by its creator, and
  // deleting an ancestor deletes its descendants with it.
  await db.schema
    .createTable('scoped_access_tokens')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('creator_id', 'text', (c) => c.notNull())
    .addColumn('parent_id', 'text')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('policy', 'text', (c) => c.notNull())
    // As the caller sent it (returned verbatim), and normalised for comparisons.
    .addColumn('not_valid_after', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('allowed_uses', 'integer')
    .addColumn('consumed_uses', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('secret_digest', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('scoped_access_tokens_pk', ['account_id', 'id'])
    .addForeignKeyConstraint(
      'scoped_access_tokens_parent_fk',
      ['account_id', 'parent_id'],
      'scoped_access_tokens',
      ['account_id', 'id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute()
  // Authentication knows only the id (from `http_auth.username`).
  await db.schema
    .createIndex('scoped_access_tokens_id')
    .on('scoped_access_tokens')
    .column('id')
    .unique()
    .execute()
  await db.schema
    .createIndex('scoped_access_tokens_creator')
    .on('scoped_access_tokens')
    .columns(['account_id', 'creator_id'])
    .execute()
  await db.schema
    .createIndex('scoped_access_tokens_parent')
    .on('scoped_access_tokens')
    .columns(['account_id', 'parent_id'])
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('scoped_access_tokens').execute()
}
