import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * Re-indexing in batches (issue 14, point 5): a vault schema whose indexed fields changed has
 * its documents re-indexed in bounded batches after the change commits, not in the change's own
 * transaction. One row per schema ever re-indexed: where the batches are (`after`: the last
 * document id done, in id order), how far (`done` of `total`), and when it finished (null while
 * running; a server that stops mid-way resumes from `after` at its next start). Keyed by
 * `account_id` first (the shard rule).
 */
export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('schema_reindex')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('schema_id', 'text', (c) => c.notNull())
    .addColumn('vault_id', 'text', (c) => c.notNull())
    .addColumn('after', 'text', (c) => c.notNull())
    .addColumn('done', 'integer', (c) => c.notNull())
    .addColumn('total', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .addPrimaryKeyConstraint('schema_reindex_pk', ['account_id', 'schema_id'])
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('schema_reindex').execute()
}
