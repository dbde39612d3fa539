import { PostgresAdapter, sql } from 'kysely'
import type { ActiveCredential } from '../../access/credentials.js'
import { addDigest, removeDigests, routeByDigest } from '../../store/credential-directory.repo.js'
import type { Executor } from '../../store/executor.js'
import { precompiled } from '../../store/precompiled.js'

export type StoredCredentialKind = ActiveCredential['kind']

/** A credential row as read, with what the account's access-token cap needs. */
interface CredentialRead extends ActiveCredential {
  created_at: string
  expires_at: string | null
  /** The account's `max_access_token_duration_seconds` (null: no cap, or no settings row). */
  token_cap: number | null
}

/**
 * Whether the account's current cap still lets this credential act: an access token works only
 * while now < created_at + cap (its own expiry is checked by the query). API keys have no cap.
 */
function withinTokenCap(row: CredentialRead, now: string): boolean {
  if (row.kind !== 'access_token' || row.token_cap === null) return true
  return Date.parse(row.created_at) + Number(row.token_cap) * 1000 > Date.parse(now)
}

/** When the credential stops working as things stand (epoch ms; Infinity: no end). */
function endOf(row: CredentialRead): number {
  const expires = row.expires_at === null ? Number.POSITIVE_INFINITY : Date.parse(row.expires_at)
  if (row.kind !== 'access_token' || row.token_cap === null) return expires
  return Math.min(expires, Date.parse(row.created_at) + Number(row.token_cap) * 1000)
}

function active(row: CredentialRead): ActiveCredential {
  const { created_at: _created, expires_at: _expires, token_cap: _cap, ...credential } = row
  return credential
}

/** Credentials of users whose status still lets them act (LOCKED and DEACTIVATED cannot). */
const USABLE_STATUSES = ['ACTIVATED', 'PENDING']

/**
 * The account's unexpired credential with this digest, joined to its user if the user may act,
 * and to the account's settings row (if any) for the access-token cap: the cap is read in this
 * one query, and the result cached per node is dropped by any settings write (the rights feed,
 * store/rights-feed.ts), so a lowered cap holds at once on every node. (It reads the settings
 * table directly for that reason, as the policy query below reads the groups'.)
 */
const usableCredential = (db: Executor, accountId: string, digest: string, now: string) =>
  db
    .selectFrom('credentials as c')
    .innerJoin('users as u', (j) =>
      j.onRef('u.account_id', '=', 'c.account_id').onRef('u.id', '=', 'c.user_id'),
    )
    .leftJoin('account_settings as s', 's.account_id', 'c.account_id')
    .select([
      'c.digest',
      'c.account_id',
      'c.user_id',
      'c.kind',
      'u.username',
      'u.status',
      'u.attributes',
      'u.mfa_enrolled',
      'c.created_at',
      'c.expires_at',
      's.max_access_token_duration_seconds as token_cap',
    ])
    .where('c.account_id', '=', accountId)
    .where('c.digest', '=', digest)
    .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', now)]))
    .where('u.status', 'in', USABLE_STATUSES)

const findUsableWithPoliciesQuery = precompiled(
  (db: Executor, accountId: string, digest: string, now: string) =>
    usableCredential(db, accountId, digest, now)
      .leftJoin('group_members as m', (j) =>
        j.onRef('m.account_id', '=', 'c.account_id').onRef('m.user_id', '=', 'c.user_id'),
      )
      .leftJoin('groups as g', (j) =>
        j.onRef('g.account_id', '=', 'm.account_id').onRef('g.id', '=', 'm.group_id'),
      )
      .select('g.policy'),
)

/**
 * The credential as `findUsable` gives it, plus the JSON policy of every group of its user, in
 * one query: every policy-checked request needs both, and this is its hottest path. (It reads
 * the groups tables directly for that reason.)
 */
export async function findUsableWithPolicies(
  db: Executor,
  digest: string,
  now: string,
): Promise<{ credential: ActiveCredential; policies: string[]; endsAtMs: number } | undefined> {
  return routeByDigest(db, digest, async (accountId) => {
    const rows = await findUsableWithPoliciesQuery(db, accountId, digest, now)
    const [first] = rows
    if (!first) return undefined
    const { policy: _policy, ...credential } = first
    if (!withinTokenCap(credential as CredentialRead, now)) return undefined
    const policies = rows.flatMap((r) => (r.policy === null ? [] : [r.policy])).sort()
    const read = credential as CredentialRead
    return { credential: active(read), policies, endsAtMs: endOf(read) }
  })
}

export async function insert(
  db: Executor,
  row: {
    digest: string
    account_id: string
    user_id: string
    kind: StoredCredentialKind
    expires_at: string | null
    created_at: string
  },
): Promise<void> {
  // The two rows commit together: with them the request's audit event (issue 13), which must
  // not say a token was issued when its second row was refused.
  if (!db.isTransaction) return db.transaction().execute((trx) => insert(trx, row))
  await addDigest(db, row.digest, row.account_id)
  await db.insertInto('credentials').values(row).execute()
}

/** A delete of the account's credentials, narrowed by the caller. */
const deleteInAccount = (db: Executor, accountId: string) =>
  db.deleteFrom('credentials').where('account_id', '=', accountId)

/**
 * Runs the delete and forgets the deleted digests in the directory; how many. Should the second
 * step fail, the rows left behind grant nothing (store/credential-directory.repo.ts).
 */
async function deleteAndForget(
  db: Executor,
  q: ReturnType<typeof deleteInAccount>,
): Promise<number> {
  const deleted = await q.returning('digest').execute()
  await removeDigests(
    db,
    deleted.map((r) => r.digest),
  )
  return deleted.length
}

export async function deleteByDigest(db: Executor, accountId: string, digest: string) {
  return deleteAndForget(db, deleteInAccount(db, accountId).where('digest', '=', digest))
}

export async function deleteForUser(
  db: Executor,
  accountId: string,
  userId: string,
  kind?: StoredCredentialKind,
): Promise<void> {
  let q = deleteInAccount(db, accountId).where('user_id', '=', userId)
  if (kind) q = q.where('kind', '=', kind)
  await deleteAndForget(db, q)
}

/** Deletes the user's access tokens, all but `keepDigest` when given; returns how many. */
export async function deleteAccessTokens(
  db: Executor,
  accountId: string,
  userId: string,
  keepDigest?: string,
): Promise<number> {
  let q = deleteInAccount(db, accountId)
    .where('user_id', '=', userId)
    .where('kind', '=', 'access_token')
  if (keepDigest !== undefined) q = q.where('digest', '!=', keepDigest)
  return deleteAndForget(db, q)
}

/**
 * Shortens the stored expiry of every live access token of the account to at most `created_at`
 * plus `capSeconds` (one statement), so a token the cap has ended stays ended if the cap is
 * raised again later; tokens already expired at `now` are left alone. Timestamps are ISO text:
 * the engine's date arithmetic writes them in the same form (`YYYY-MM-DDTHH:MM:SS.sssZ`), so
 * they still compare as text. Returns how many changed.
 */
export async function clampAccessTokens(
  db: Executor,
  accountId: string,
  capSeconds: number,
  now: string,
): Promise<number> {
  const capped =
    db.getExecutor().adapter instanceof PostgresAdapter
      ? sql<string>`to_char((created_at::timestamptz + make_interval(secs => ${capSeconds}::double precision)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
      : sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', created_at, '+' || ${capSeconds} || ' seconds')`
  const result = await db
    .updateTable('credentials')
    .set({ expires_at: capped })
    .where('account_id', '=', accountId)
    .where('kind', '=', 'access_token')
    // Tokens already expired need no shortening (and are refused whatever their row says).
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', capped)]))
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}
