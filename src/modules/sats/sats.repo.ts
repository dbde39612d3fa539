import { PostgresAdapter, sql } from 'kysely'
import { addDigest, removeDigests, routeByDigest } from '../../store/credential-directory.repo.js'
import type { Executor } from '../../store/executor.js'
import type { ScopedAccessTokensTable } from '../../store/schema.js'

export type SatRow = ScopedAccessTokensTable

/** A SAT with the status of the user it acts for, as authentication needs it. */
export interface SatWithCreator extends SatRow {
  creator_status: string
  /**
   * For a SAT minted through a session: the expiry of that access token when it still exists
   * (null when it does not, or never expires: `session_found` tells them apart).
   */
  session_expires_at: string | null
  session_found: string | null
  /** That access token's creation, and the account's cap on access-token life (null: none). */
  session_created_at: string | null
  session_token_cap: number | null
}

/** Which SATs a caller manages: a user, those made for them; a SAT, those it minted itself. */
export type SatOwner = { creatorId: string } | { parentId: string }

/** Stores the SAT, its secret's digest first in the directory (the account's address). */
export async function insert(db: Executor, row: SatRow): Promise<void> {
  await addDigest(db, row.secret_digest, row.account_id)
  await db.insertInto('scoped_access_tokens').values(row).execute()
}

/**
 * The SAT with this id and password digest, with its creator's status. `http_auth` carries no
 * account: the directory names it by the password's digest (routed by digest), then the SAT is
 * read in that account. Undefined for a wrong password or id.
 */
export function findBySecret(
  db: Executor,
  id: string,
  secretDigest: string,
): Promise<SatWithCreator | undefined> {
  return routeByDigest(db, secretDigest, (accountId) => findWithCreator(db, accountId, id))
}

async function findWithCreator(
  db: Executor,
  accountId: string,
  id: string,
): Promise<SatWithCreator | undefined> {
  return (
    db
      .selectFrom('scoped_access_tokens as s')
      .innerJoin('users as u', (j) =>
        j.onRef('u.account_id', '=', 's.account_id').onRef('u.id', '=', 's.creator_id'),
      )
      // The session a SAT lives within, when it was minted through one (a logout deletes it).
      .leftJoin('credentials as c', (j) =>
        j
          .onRef('c.digest', '=', 's.session_digest')
          .onRef('c.account_id', '=', 's.account_id')
          .onRef('c.user_id', '=', 's.creator_id')
          .on('c.kind', '=', 'access_token'),
      )
      // The account's cap on access-token life holds the session's SATs to it too.
      .leftJoin('account_settings as a', 'a.account_id', 's.account_id')
      .selectAll('s')
      .select(['u.status as creator_status', 'c.expires_at as session_expires_at'])
      .select(['c.digest as session_found', 'c.created_at as session_created_at'])
      .select('a.max_access_token_duration_seconds as session_token_cap')
      .where('s.account_id', '=', accountId)
      .where('s.id', '=', id)
      .executeTakeFirst()
  )
}

export async function find(db: Executor, accountId: string, id: string) {
  return db
    .selectFrom('scoped_access_tokens')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
}

/**
 * One use, atomically: the row changes only while the token is unexpired and has uses left, so
 * concurrent requests on any number of nodes can never together exceed `allowed_uses` (each
 * engine re-checks the condition against the latest row version before updating it).
 */
export async function consumeUse(
  db: Executor,
  accountId: string,
  id: string,
  now: string,
): Promise<boolean> {
  const result = await db
    .updateTable('scoped_access_tokens')
    .set({ consumed_uses: sql`consumed_uses + 1` })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .where('expires_at', '>', now)
    .where((eb) =>
      eb.or([eb('allowed_uses', 'is', null), eb('consumed_uses', '<', eb.ref('allowed_uses'))]),
    )
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

function owned(db: Executor, accountId: string, owner: SatOwner) {
  const q = db.selectFrom('scoped_access_tokens').where('account_id', '=', accountId)
  return 'creatorId' in owner
    ? q.where('creator_id', '=', owner.creatorId)
    : q.where('parent_id', '=', owner.parentId)
}

export async function listOwned(
  db: Executor,
  accountId: string,
  owner: SatOwner,
  page: number,
  perPage: number,
): Promise<{ rows: SatRow[]; total: number }> {
  const rows = await owned(db, accountId, owner)
    .selectAll()
    .orderBy('created_at')
    .orderBy('id')
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute()
  const count = await owned(db, accountId, owner)
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  return { rows, total: Number(count.n) }
}

export async function findOwned(
  db: Executor,
  accountId: string,
  owner: SatOwner,
  id: string,
): Promise<SatRow | undefined> {
  return owned(db, accountId, owner).selectAll().where('id', '=', id).executeTakeFirst()
}

/**
 * Deletes the SAT; its descendants go with it (foreign key, on delete cascade). Its directory
 * row goes too; its descendants' rows stay behind, pointing at SATs that no longer exist, which
 * grants nothing (store/credential-directory.repo.ts).
 */
export async function remove(db: Executor, accountId: string, id: string): Promise<boolean> {
  const deleted = await db
    .deleteFrom('scoped_access_tokens')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .returning('secret_digest')
    .execute()
  await removeDigests(
    db,
    deleted.map((r) => r.secret_digest),
  )
  return deleted.length > 0
}

/** SATs the server issued with exactly this policy under this creator and parent. */
function issued(
  db: Executor,
  accountId: string,
  creatorId: string,
  parentId: string | null,
  policy: string,
) {
  const q = db
    .selectFrom('scoped_access_tokens')
    .where('account_id', '=', accountId)
    .where('creator_id', '=', creatorId)
    .where('policy', '=', policy)
  return parentId === null ? q.where('parent_id', 'is', null) : q.where('parent_id', '=', parentId)
}

export function issuedSince(
  db: Executor,
  key: { accountId: string; creatorId: string; parentId: string | null; policy: string },
  name: string,
  since: string,
) {
  return issued(db, key.accountId, key.creatorId, key.parentId, key.policy)
    .select('id')
    .where('name', '=', name)
    .where('created_at', '>', since)
    .executeTakeFirst()
}

export async function removeIssued(
  db: Executor,
  key: { accountId: string; creatorId: string; parentId: string | null; policy: string },
  name: string,
): Promise<void> {
  const deleted = await db
    .deleteFrom('scoped_access_tokens')
    .where('account_id', '=', key.accountId)
    .where(
      'id',
      'in',
      issued(db, key.accountId, key.creatorId, key.parentId, key.policy)
        .select('id')
        .where('name', '=', name),
    )
    .returning('secret_digest')
    .execute()
  await removeDigests(
    db,
    deleted.map((r) => r.secret_digest),
  )
}

/**
 * Serializes SAT creation per user on PostgreSQL (a row lock on the creator, held to the end of
 * the transaction), so a count taken after an insert sees every concurrent insert. SQLite has one
 * writer at a time: nothing to lock.
 */
export async function lockCreator(db: Executor, accountId: string, userId: string): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return
  await db
    .selectFrom('users')
    .select('id')
    .where('account_id', '=', accountId)
    .where('id', '=', userId)
    .forUpdate()
    .execute()
}

/** Live SATs (unexpired, uses left) made for a user, or minted by one SAT. */
export async function countLive(
  db: Executor,
  accountId: string,
  owner: SatOwner,
  now: string,
): Promise<number> {
  const row = await owned(db, accountId, owner)
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('expires_at', '>', now)
    .where((eb) =>
      eb.or([eb('allowed_uses', 'is', null), eb('consumed_uses', '<', eb.ref('allowed_uses'))]),
    )
    .executeTakeFirstOrThrow()
  return Number(row.n)
}
