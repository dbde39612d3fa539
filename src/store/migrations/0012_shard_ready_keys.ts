import { type Kysely, PostgresAdapter, sql } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * Shard-ready keys (issue 12, point 8): every tenant table's keys lead with `account_id`, so the
 * schema can be distributed by account (docs/architecture.md, Scaling out).
 *
 * - `credential_directory`: digest of a presented secret (API key, access token, SAT password)
 *   → its account. Distributed by digest: a request's first, and only unrouted, lookup. Filled
 *   here from every credential and SAT already issued, so they all keep working.
 * - `credentials`: primary key (account_id, digest) instead of the digest alone.
 * - `scoped_access_tokens`: the unique index on `id` alone goes (the key is (account_id, id)).
 * - `login_throttle`: gains `account_id`, key (account_id, key). Server-wide windows (per client
 *   address, all logins together) live under the reserved scope '' (no account). The old rows
 *   all go there: their keys are digests, so their account cannot be recovered; the server-wide
 *   windows carry over as they were, per-account windows start afresh (decisions.md, 28).
 *
 * SQLite cannot change a primary key: those two tables are rebuilt (create, copy, drop, rename).
 */
export async function up(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter

  await db.schema
    .createTable('credential_directory')
    .addColumn('digest', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .execute()
  await sql`insert into credential_directory (digest, account_id)
    select digest, account_id from credentials`.execute(db)
  await sql`insert into credential_directory (digest, account_id)
    select secret_digest, account_id from scoped_access_tokens`.execute(db)

  await db.schema.dropIndex('scoped_access_tokens_id').execute()

  if (postgres) {
    await sql`alter table credentials drop constraint credentials_pkey`.execute(db)
    await sql`alter table credentials add constraint credentials_pk primary key (account_id, digest)`.execute(
      db,
    )
    await sql`alter table login_throttle add column account_id text not null default ''`.execute(db)
    await sql`alter table login_throttle alter column account_id drop default`.execute(db)
    await sql`alter table login_throttle drop constraint login_throttle_pkey`.execute(db)
    await sql`alter table login_throttle add constraint login_throttle_pk primary key (account_id, key)`.execute(
      db,
    )
    return
  }

  await db.schema
    .createTable('credentials_0012')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('digest', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('credentials_pk', ['account_id', 'digest'])
    .addForeignKeyConstraint('credentials_user_fk', ['account_id', 'user_id'], 'users', [
      'account_id',
      'id',
    ])
    .execute()
  await sql`insert into credentials_0012 (account_id, digest, user_id, kind, expires_at, created_at)
    select account_id, digest, user_id, kind, expires_at, created_at from credentials`.execute(db)
  await db.schema.dropTable('credentials').execute()
  await sql`alter table credentials_0012 rename to credentials`.execute(db)
  await db.schema
    .createIndex('credentials_by_user')
    .on('credentials')
    .columns(['account_id', 'user_id', 'kind'])
    .execute()

  await db.schema
    .createTable('login_throttle_0012')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('window_started_at', 'text', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('in_flight', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('login_throttle_pk', ['account_id', 'key'])
    .execute()
  await sql`insert into login_throttle_0012 (account_id, key, window_started_at, failures, in_flight)
    select '', key, window_started_at, failures, in_flight from login_throttle`.execute(db)
  await db.schema.dropTable('login_throttle').execute()
  await sql`alter table login_throttle_0012 rename to login_throttle`.execute(db)
}

export async function down(db: Db): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  // Per-account windows cannot share one key space again: only the server-wide ones go back.
  await sql`delete from login_throttle where account_id <> ''`.execute(db)
  if (postgres) {
    await sql`alter table login_throttle drop constraint login_throttle_pk`.execute(db)
    await sql`alter table login_throttle drop column account_id`.execute(db)
    await sql`alter table login_throttle add primary key (key)`.execute(db)
    await sql`alter table credentials drop constraint credentials_pk`.execute(db)
    await sql`alter table credentials add primary key (digest)`.execute(db)
  } else {
    await sql`create table login_throttle_0011 (key text primary key,
      window_started_at text not null, failures integer not null,
      in_flight integer not null default 0)`.execute(db)
    await sql`insert into login_throttle_0011 select key, window_started_at, failures, in_flight
      from login_throttle`.execute(db)
    await db.schema.dropTable('login_throttle').execute()
    await sql`alter table login_throttle_0011 rename to login_throttle`.execute(db)
    await sql`create table credentials_0011 (digest text primary key, account_id text not null,
      user_id text not null, kind text not null, expires_at text, created_at text not null,
      constraint credentials_user_fk foreign key (account_id, user_id)
        references users (account_id, id))`.execute(db)
    await sql`insert into credentials_0011 select digest, account_id, user_id, kind, expires_at,
      created_at from credentials`.execute(db)
    await db.schema.dropTable('credentials').execute()
    await sql`alter table credentials_0011 rename to credentials`.execute(db)
    await sql`create index credentials_by_user on credentials (account_id, user_id, kind)`.execute(
      db,
    )
  }
  await sql`create unique index scoped_access_tokens_id on scoped_access_tokens (id)`.execute(db)
  await db.schema.dropTable('credential_directory').execute()
}
