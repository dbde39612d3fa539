import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * Search at a million documents (issue 14): every search_index index now ends with doc_id, so a
 * filter's set, its count and its per-candidate checks are index-only range scans on both
 * engines (the 0003 value indexes made each match a table read).
 * - `search_index_<col>_doc` (account, schema, field, value, doc_id): a filter's set.
 * - `search_index_geo_box` (account, schema, field, geo_lat, geo_long, doc_id): the geo
 *   bounding box on both coordinates (latitude seeks, longitude is checked in the index).
 * - `search_index_probe` (account, schema, field, doc_id, every value column): one seek checks
 *   one candidate against a filter, reads its sort key, and walks a field in doc_id order to cut
 *   a page without sorting every match. It replaces 0008's `search_index_sort`, which lacked
 *   value_lower.
 * - `documents_by_schema_id` (account, vault, schema, id): a vault's documents under a schema in
 *   id order, for a page without a sort or filter; it replaces 0002's `documents_by_schema`.
 * - `documents_by_owner_schema` (account, vault, owner, schema): an owner-scoped caller's
 *   documents under the schema; it replaces 0002's `documents_by_owner` (its prefix), which
 *   SQLite (no statistics) passed over for documents_by_schema_id, reading the whole vault. It
 *   leaves out `id` on purpose: covering, SQLite preferred it on its (account, vault) prefix
 *   over the 4-column seek of documents_by_schema_id when joining a match to its document.
 * Creating an index fills it from the existing rows: no other backfill is needed.
 */
const VALUE_INDEXES = [
  ['search_index_text_doc', ['value_text']],
  ['search_index_lower_doc', ['value_lower']],
  ['search_index_num_doc', ['value_num']],
  ['search_index_geo_box', ['geo_lat', 'geo_long']],
] as const

const PROBE_COLUMNS = ['value_text', 'value_lower', 'value_num', 'geo_lat', 'geo_long']

export async function up(db: Db): Promise<void> {
  for (const [name, columns] of VALUE_INDEXES) {
    await db.schema
      .createIndex(name)
      .on('search_index')
      .columns(['account_id', 'schema_id', 'field', ...columns, 'doc_id'])
      .execute()
  }
  await db.schema
    .createIndex('search_index_probe')
    .on('search_index')
    .columns(['account_id', 'schema_id', 'field', 'doc_id', ...PROBE_COLUMNS])
    .execute()
  await db.schema
    .createIndex('documents_by_schema_id')
    .on('documents')
    .columns(['account_id', 'vault_id', 'schema_id', 'id'])
    .execute()
  await db.schema
    .createIndex('documents_by_owner_schema')
    .on('documents')
    .columns(['account_id', 'vault_id', 'owner_id', 'schema_id'])
    .execute()
  for (const old of [
    'search_index_text',
    'search_index_lower',
    'search_index_num',
    'search_index_geo',
    'search_index_sort',
    'documents_by_schema',
    'documents_by_owner',
  ]) {
    await db.schema.dropIndex(old).execute()
  }
}

export async function down(db: Db): Promise<void> {
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
    .createIndex('search_index_sort')
    .on('search_index')
    .columns([
      'account_id',
      'schema_id',
      'field',
      'doc_id',
      'value_text',
      'value_num',
      'geo_lat',
      'geo_long',
    ])
    .execute()
  await db.schema
    .createIndex('documents_by_schema')
    .on('documents')
    .columns(['account_id', 'vault_id', 'schema_id'])
    .execute()
  await db.schema
    .createIndex('documents_by_owner')
    .on('documents')
    .columns(['account_id', 'vault_id', 'owner_id'])
    .execute()
  await db.schema.dropIndex('documents_by_owner_schema').execute()
  for (const [name] of VALUE_INDEXES) await db.schema.dropIndex(name).execute()
  await db.schema.dropIndex('search_index_probe').execute()
  await db.schema.dropIndex('documents_by_schema_id').execute()
}
