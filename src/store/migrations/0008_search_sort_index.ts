import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * A sort key is the smallest (or largest) value of one field of one candidate document. The
 * older indexes lead with (account, schema, field) and then the value, so finding one document's
 * rows meant walking the whole field per candidate: a sort was quadratic in the documents
 * (security review, finding 2). This index leads with (account, schema, field, doc_id) and
 * carries the sortable columns, so each candidate's key is one seek that never reads the table.
 */
export async function up(db: Db): Promise<void> {
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
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropIndex('search_index_sort').execute()
}
