import { type Kysely, PostgresAdapter, sql } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/** The full-access policy of bootstrap admin groups as migration 0013 left it. */
const RESOURCES_BEFORE = [
  'Vault::.*',
  'Vault::.*::Document::.*',
  'Vault::.*::Blob::.*',
  'Vault::.*::Schema::.*',
  'Vault::.*::Search::.*',
  'User::.*',
  'User::.*::Password',
  'User::.*::Message',
  'UserSchema::.*',
  'Group::.*',
  'Group::.*::GroupMembership::.*',
  'PasswordResetFlow::.*',
  'PasswordResetFlow::.*::Email::.*',
  'Account::.*::Settings',
]
const FULL_ACCESS_BEFORE = JSON.stringify([{ Resources: RESOURCES_BEFORE, Activities: 'CRUD' }])
/** The same policy with the audit trail (`Audit::`), as new accounts now get it. */
const FULL_ACCESS_AFTER = JSON.stringify([
  { Resources: [...RESOURCES_BEFORE, 'Audit::'], Activities: 'CRUD' },
])

const isPostgres = (db: Db) => db.getExecutor().adapter instanceof PostgresAdapter

/**
 * The audit trail (issue 13, part 1).
 * - `audit_events`: one row per audited request or CLI command, in a hash chain per account
 *   (`seq` 1, 2, …; `hash` = SHA-256 over the canonical content and `prev_hash`). Account ''
 *   holds events that belong to no account (an unknown credential, key rotation).
 * - `audit_chain_heads`: one row per chain, locked by each appending transaction (the total
 *   order on PostgreSQL with several nodes); `anchor_seq`/`anchor_hash` are where the kept
 *   chain starts after retention pruning (0 and the genesis hash before any).
 * No foreign key to `accounts`: the '' chain has none, and the trail outlives nothing.
 *
 * PostgreSQL: a trigger refuses UPDATE and DELETE of events unless the transaction set
 * `coffer.audit_prune = 'on'` (the retention pruner, SET LOCAL); another refuses TRUNCATE always.
 *
 * Like 0013: a group whose policy is still, byte for byte, the full-access policy every
 * bootstrap admin group was given gains `Audit::` (R is within its CRUD).
 */
export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('audit_events')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'bigint', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('transaction_id', 'text', (c) => c.notNull())
    .addColumn('actor_user_id', 'text')
    .addColumn('credential_kind', 'text')
    .addColumn('credential_ref', 'text')
    .addColumn('sat_id', 'text')
    .addColumn('sat_creator_id', 'text')
    .addColumn('client_ip', 'text')
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('route', 'text', (c) => c.notNull())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('resources', 'text', (c) => c.notNull())
    .addColumn('decision', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('operations_consumed', 'integer', (c) => c.notNull())
    .addColumn('operations_category', 'text')
    .addColumn('prev_hash', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_events_pk', ['account_id', 'seq'])
    .execute()
  await db.schema
    .createIndex('audit_events_at_idx')
    .on('audit_events')
    .columns(['account_id', 'at'])
    .execute()
  await db.schema
    .createTable('audit_chain_heads')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('last_seq', 'bigint', (c) => c.notNull())
    .addColumn('last_hash', 'text', (c) => c.notNull())
    .addColumn('anchor_seq', 'bigint', (c) => c.notNull())
    .addColumn('anchor_hash', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('audit_chain_heads_pk', ['account_id'])
    .execute()
  if (isPostgres(db)) {
    await sql`
      create or replace function coffer_audit_append_only() returns trigger as $$
      begin
        if coalesce(current_setting('coffer.audit_prune', true), '') = 'on' and tg_op = 'DELETE' then
          return old;
        end if;
        raise exception 'audit events are append-only (%)', tg_op using errcode = '42501';
      end
      $$ language plpgsql`.execute(db)
    await sql`
      create trigger audit_events_append_only before update or delete on audit_events
      for each row execute function coffer_audit_append_only()`.execute(db)
    // TRUNCATE fires no row trigger: refused by a statement trigger (the pruner only deletes).
    await sql`
      create trigger audit_events_no_truncate before truncate on audit_events
      for each statement execute function coffer_audit_append_only()`.execute(db)
  }
  await sql`update groups set policy = ${FULL_ACCESS_AFTER} where policy = ${FULL_ACCESS_BEFORE}`.execute(
    db,
  )
}

export async function down(db: Db): Promise<void> {
  await sql`update groups set policy = ${FULL_ACCESS_BEFORE} where policy = ${FULL_ACCESS_AFTER}`.execute(
    db,
  )
  if (isPostgres(db)) {
    await sql`drop trigger if exists audit_events_append_only on audit_events`.execute(db)
    await sql`drop trigger if exists audit_events_no_truncate on audit_events`.execute(db)
    await sql`drop function if exists coffer_audit_append_only()`.execute(db)
  }
  await db.schema.dropTable('audit_chain_heads').execute()
  await db.schema.dropTable('audit_events').execute()
}
