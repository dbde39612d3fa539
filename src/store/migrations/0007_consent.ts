import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

export async function up(db: Db): Promise<void> {
  // A consumer's current consent in one shop. Not tied to a Coffer account: keys lead with the
  // partition (the shop), the consent API's natural shard key. The consumer (customer id or
  // email) is stored only as a keyed digest (lookup) and sealed (read back by the export).
  await db.schema
    .createTable('consent_records')
    .addColumn('shop', 'text', (c) => c.notNull())
    .addColumn('consumer_digest', 'text', (c) => c.notNull())
    .addColumn('consumer_sealed', 'text', (c) => c.notNull())
    .addColumn('consumer_kind', 'text', (c) => c.notNull())
    .addColumn('consent_analytics', 'integer')
    .addColumn('consent_advertising', 'integer')
    .addColumn('consent_personalization', 'integer')
    .addColumn('consent_targeted_advertising', 'integer')
    .addColumn('opted_out', 'integer')
    .addColumn('choice_at', 'text')
    .addColumn('token_epoch', 'bigint', (c) => c.notNull())
    .addColumn('last_provider', 'text', (c) => c.notNull())
    .addColumn('last_privacy_center_id', 'text', (c) => c.notNull())
    .addColumn('last_client_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('consent_records_pk', ['shop', 'consumer_digest'])
    .execute()

  // Proof of consent: every change, appended and never rewritten (no UPDATE or DELETE of this
  // table exists in the code). Ids are UUIDv7, so (shop, id) is the shop's time order.
  await db.schema
    .createTable('consent_events')
    .addColumn('shop', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('consumer_digest', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('provider', 'text')
    .addColumn('privacy_center_id', 'text')
    .addColumn('client_id', 'text')
    .addColumn('changes', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('gpc', 'integer')
    .addColumn('user_agent', 'text')
    .addPrimaryKeyConstraint('consent_events_pk', ['shop', 'id'])
    .execute()
  await db.schema
    .createIndex('consent_events_by_consumer')
    .on('consent_events')
    .columns(['shop', 'consumer_digest', 'id'])
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('consent_events').execute()
  await db.schema.dropTable('consent_records').execute()
}
