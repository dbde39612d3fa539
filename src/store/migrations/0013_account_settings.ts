import { type Kysely, sql } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/** The resources of the full-access policy the bootstrap admin group got from 0001 up to this release. */
const FULL_ACCESS_RESOURCES_BEFORE = [
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
]

/** A one-statement CRUD policy as stored (the JSON text is compared byte for byte). */
const crudPolicy = (resources: string[]) =>
  JSON.stringify([{ Resources: resources, Activities: 'CRUD' }])

const FULL_ACCESS_BEFORE = crudPolicy(FULL_ACCESS_RESOURCES_BEFORE)

/** The same policy with the account's security settings, as new accounts now get it. */
const FULL_ACCESS_AFTER = crudPolicy([...FULL_ACCESS_RESOURCES_BEFORE, 'Account::.*::Settings'])

/**
 * Account security settings (issue 13, part 2): one row per account that changed a setting; no
 * row means every default (modules/settings). Keyed by `account_id` alone (the shard rule).
 * Booleans are 0/1 integers; a null cap means "no cap beyond the server's own limits".
 *
 * A group whose policy is still, byte for byte, the full-access policy every bootstrap admin
 * group was given gains `Account::.*::Settings` (decisions: an untouched full-access group meant
 * "everything"; a group an administrator edited is left as they made it).
 */
export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('account_settings')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('max_access_token_duration_seconds', 'integer')
    .addColumn('require_mfa', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('password_min_length', 'integer', (c) => c.notNull().defaultTo(8))
    .addColumn('session_revocation_on_password_change', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('account_settings_pk', ['account_id'])
    .addForeignKeyConstraint('account_settings_account_fk', ['account_id'], 'accounts', ['id'])
    .execute()
  await sql`update groups set policy = ${FULL_ACCESS_AFTER} where policy = ${FULL_ACCESS_BEFORE}`.execute(
    db,
  )
}

export async function down(db: Db): Promise<void> {
  await sql`update groups set policy = ${FULL_ACCESS_BEFORE} where policy = ${FULL_ACCESS_AFTER}`.execute(
    db,
  )
  await db.schema.dropTable('account_settings').execute()
}
