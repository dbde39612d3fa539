import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

export async function up(db: Db): Promise<void> {
  // Data keys of envelope encryption, wrapped by the master key named by master_key_id.
  await db.schema
    .createTable('data_keys')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('wrapped_key', 'text', (c) => c.notNull())
    .addColumn('master_key_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('data_keys_pk', ['account_id', 'id'])
    .execute()

  await db.schema
    .createTable('vaults')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('vaults_pk', ['account_id', 'id'])
    .addUniqueConstraint('vaults_name_unique', ['account_id', 'name'])
    .execute()

  // The schema a document is indexed by. CRUD and the index arrive with the search feature;
  // documents link to it now so the "tied to a schema" rule holds from the start.
  await db.schema
    .createTable('schemas')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('vault_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('fields', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('schemas_pk', ['account_id', 'vault_id', 'id'])
    .addForeignKeyConstraint('schemas_vault_fk', ['account_id', 'vault_id'], 'vaults', [
      'account_id',
      'id',
    ])
    .execute()

  await db.schema
    .createTable('documents')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('vault_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('owner_id', 'text')
    .addColumn('schema_id', 'text')
    // 1 once the document has ever been tied to a schema: its content must stay a JSON object.
    .addColumn('schema_bound', 'integer', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('documents_pk', ['account_id', 'vault_id', 'id'])
    .addForeignKeyConstraint('documents_vault_fk', ['account_id', 'vault_id'], 'vaults', [
      'account_id',
      'id',
    ])
    .addForeignKeyConstraint('documents_owner_fk', ['account_id', 'owner_id'], 'users', [
      'account_id',
      'id',
    ])
    .addForeignKeyConstraint(
      'documents_schema_fk',
      ['account_id', 'vault_id', 'schema_id'],
      'schemas',
      ['account_id', 'vault_id', 'id'],
    )
    .execute()
  await db.schema
    .createIndex('documents_by_owner')
    .on('documents')
    .columns(['account_id', 'vault_id', 'owner_id'])
    .execute()
  await db.schema
    .createIndex('documents_by_schema')
    .on('documents')
    .columns(['account_id', 'vault_id', 'schema_id'])
    .execute()

  await db.schema
    .createTable('blobs')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('vault_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('owner_id', 'text')
    .addColumn('filename', 'text', (c) => c.notNull())
    .addColumn('mime_type', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    // The stored object (each content version has its own) and its content key, wrapped.
    .addColumn('object_key', 'text', (c) => c.notNull())
    .addColumn('content_key', 'text', (c) => c.notNull())
    .addColumn('metadata_document_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('blobs_pk', ['account_id', 'vault_id', 'id'])
    .addForeignKeyConstraint('blobs_vault_fk', ['account_id', 'vault_id'], 'vaults', [
      'account_id',
      'id',
    ])
    .addForeignKeyConstraint('blobs_owner_fk', ['account_id', 'owner_id'], 'users', [
      'account_id',
      'id',
    ])
    .execute()
  await db.schema
    .createIndex('blobs_by_owner')
    .on('blobs')
    .columns(['account_id', 'vault_id', 'owner_id'])
    .execute()
}

export async function down(db: Db): Promise<void> {
  for (const table of ['blobs', 'documents', 'schemas', 'vaults', 'data_keys']) {
    await db.schema.dropTable(table).execute()
  }
}
