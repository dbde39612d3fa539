import { type Kysely, PostgresAdapter, sql } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

export async function up(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  // Ranges and sorts compare code points on both engines: SQLite's BINARY does; PostgreSQL
  // needs the C collation (a database's default collation may be locale-aware).
  const text = postgres ? sql`text collate "C"` : sql`text`

  // One row per indexed value of a document (or user) under a schema (docs/search.md).
  await db.schema
    .createTable('search_index')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('schema_id', 'text', (c) => c.notNull())
    .addColumn('doc_id', 'text', (c) => c.notNull())
    .addColumn('field', 'text', (c) => c.notNull())
    .addColumn('ord', 'integer', (c) => c.notNull())
    .addColumn('value_text', text)
    .addColumn('value_lower', text)
    .addColumn('value_num', 'double precision')
    .addColumn('geo_lat', 'double precision')
    .addColumn('geo_long', 'double precision')
    .addPrimaryKeyConstraint('search_index_pk', [
      'account_id',
      'schema_id',
      'doc_id',
      'field',
      'ord',
    ])
    .execute()
  for (const [name, column] of [
    ['search_index_text', 'value_text'],
    ['search_index_lower', 'value_lower'],
    ['search_index_num', 'value_num'],
    ['search_index_geo', 'geo_lat'],
  ] as const) {
    await db.schema
      .createIndex(name)
      .on('search_index')
      .columns(['account_id', 'schema_id', 'field', column])
      .execute()
  }
  await db.schema
    .createIndex('search_index_by_doc')
    .on('search_index')
    .columns(['account_id', 'doc_id'])
    .execute()

  // The account's user schema (one per account): indexes user attributes.
  await db.schema
    .createTable('user_schemas')
    .addColumn('account_id', 'text', (c) => c.primaryKey().references('accounts.id'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('fields', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute()

  await sql`create unique index schemas_name_unique on schemas (account_id, vault_id, lower(name))`.execute(
    db,
  )
}

export async function down(db: Db): Promise<void> {
  await sql`drop index schemas_name_unique`.execute(db)
  await db.schema.dropTable('user_schemas').execute()
  await db.schema.dropTable('search_index').execute()
}
