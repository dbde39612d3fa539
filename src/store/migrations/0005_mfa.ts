import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

export async function up(db: Db): Promise<void> {
  // TOTP enrollment of a user (modules/mfa). No row: not enrolled, nothing pending. The secrets
  // are keyring ciphertexts; `last_used_step` is the high-water mark of accepted codes, moved
  // only by a conditional UPDATE so one code is accepted once across every node.
  await db.schema
    .createTable('user_mfa')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('pending_secret', 'text')
    .addColumn('secret', 'text')
    .addColumn('last_used_step', 'integer', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('failures_window_started_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_mfa_pk', ['account_id', 'user_id'])
    .addForeignKeyConstraint('user_mfa_user_fk', ['account_id', 'user_id'], 'users', [
      'account_id',
      'id',
    ])
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('user_mfa').execute()
}
