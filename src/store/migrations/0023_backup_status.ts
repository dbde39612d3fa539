import { type Kysely, sql } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/** The full-access policy of bootstrap admin groups as migration 0017 left it. */
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
  'Audit::',
  'PolicySimulator::',
]
const FULL_ACCESS_BEFORE = JSON.stringify([{ Resources: RESOURCES_BEFORE, Activities: 'CRUD' }])
/** The same policy with the backup status (`Backups::`), as new accounts now get it. */
const FULL_ACCESS_AFTER = JSON.stringify([
  { Resources: [...RESOURCES_BEFORE, 'Backups::'], Activities: 'CRUD' },
])

/**
 * The deployment's backup status (issue 22, GET /v1/backups/status) is authorised by a new
 * resource, `Backups::` with R. Like 0013, 0014 and 0017: a group whose policy is still, byte
 * for byte, the full-access policy every bootstrap admin group was given gains it; a group an
 * administrator edited is left as they made it. No schema change.
 */
export async function up(db: Db): Promise<void> {
  await sql`update groups set policy = ${FULL_ACCESS_AFTER} where policy = ${FULL_ACCESS_BEFORE}`.execute(
    db,
  )
}

export async function down(db: Db): Promise<void> {
  await sql`update groups set policy = ${FULL_ACCESS_BEFORE} where policy = ${FULL_ACCESS_AFTER}`.execute(
    db,
  )
}
