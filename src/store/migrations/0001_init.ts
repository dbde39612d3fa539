import { type Kysely, sql } from 'kysely'

// Migrations take `Kysely<any>`: they describe the schema as it was then, not today's types.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Db = Kysely<any>

export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()

  await db.schema
    .createTable('users')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text')
    .addColumn('attributes', 'text', (c) => c.notNull())
    .addColumn('mfa_enrolled', 'integer', (c) => c.notNull())
    .addColumn('access_key_digest', 'text')
    .addColumn('secret_key_digest', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('users_pk', ['account_id', 'id'])
    .execute()
  // A username is unique among ACTIVATED and LOCKED users only (spec, User resource): PENDING
  // and DEACTIVATED users do not reserve it. Both engines support this partial index.
  await db.schema
    .createIndex('users_live_username')
    .on('users')
    .columns(['account_id', 'username'])
    .unique()
    .where(sql.raw<boolean>("status in ('ACTIVATED', 'LOCKED')"))
    .execute()
  await db.schema
    .createIndex('users_by_username')
    .on('users')
    .columns(['account_id', 'username'])
    .execute()

  await db.schema
    .createTable('credentials')
    .addColumn('digest', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addForeignKeyConstraint('credentials_user_fk', ['account_id', 'user_id'], 'users', [
      'account_id',
      'id',
    ])
    .execute()
  await db.schema
    .createIndex('credentials_by_user')
    .on('credentials')
    .columns(['account_id', 'user_id', 'kind'])
    .execute()

  await db.schema
    .createTable('groups')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('policy', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('groups_pk', ['account_id', 'id'])
    .addUniqueConstraint('groups_name_unique', ['account_id', 'name'])
    .execute()

  await db.schema
    .createTable('group_members')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('group_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('group_members_pk', ['account_id', 'group_id', 'user_id'])
    .addForeignKeyConstraint(
      'group_members_group_fk',
      ['account_id', 'group_id'],
      'groups',
      ['account_id', 'id'],
      (c) => c.onDelete('cascade'),
    )
    .addForeignKeyConstraint('group_members_user_fk', ['account_id', 'user_id'], 'users', [
      'account_id',
      'id',
    ])
    .execute()
  await db.schema
    .createIndex('group_members_by_user')
    .on('group_members')
    .columns(['account_id', 'user_id'])
    .execute()

  await db.schema
    .createTable('login_throttle')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('window_started_at', 'text', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .execute()

  await db.schema
    .createTable('login_known_clients')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('client_digest', 'text', (c) => c.notNull())
    .addColumn('last_success_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('login_known_clients_pk', ['account_id', 'user_id', 'client_digest'])
    .execute()
}

export async function down(db: Db): Promise<void> {
  for (const table of [
    'login_known_clients',
    'login_throttle',
    'group_members',
    'groups',
    'credentials',
    'users',
    'accounts',
  ]) {
    await db.schema.dropTable(table).execute()
  }
}
