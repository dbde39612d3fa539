import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

export async function up(db: Db): Promise<void> {
  // Password reset flows. The SendGrid key is keyring ciphertext (it must be read back to send);
  // value specifiers and substitutions are JSON text. `linked_sat_id` has no foreign key: a flow
  // whose linked SAT is gone must stop issuing tokens, not fall back to its creator's power.
  await db.schema
    .createTable('password_reset_flows')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('creator_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('sg_api_key', 'text', (c) => c.notNull())
    .addColumn('sg_template_id', 'text', (c) => c.notNull())
    .addColumn('user_email_value_spec', 'text', (c) => c.notNull())
    .addColumn('from_email_value_spec', 'text', (c) => c.notNull())
    .addColumn('substitutions', 'text', (c) => c.notNull())
    .addColumn('linked_sat_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('password_reset_flows_pk', ['account_id', 'id'])
    .execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('password_reset_flows').execute()
}
