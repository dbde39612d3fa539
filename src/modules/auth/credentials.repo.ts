import type { Executor } from '../../store/executor.js'
import { precompiled } from '../../store/precompiled.js'

export type StoredCredentialKind = 'api_key' | 'access_token'

export interface ActiveCredential {
  digest: string
  account_id: string
  user_id: string
  kind: StoredCredentialKind
  /** The user's public columns, read in the same query (self routes need nothing more). */
  username: string
  status: string
  attributes: string
  mfa_enrolled: number
}

/** Credentials of users whose status still lets them act (LOCKED and DEACTIVATED cannot). */
const USABLE_STATUSES = ['ACTIVATED', 'PENDING']

const findUsableQuery = precompiled((db: Executor, digest: string, now: string) =>
  db
    .selectFrom('credentials as c')
    .innerJoin('users as u', (j) =>
      j.onRef('u.account_id', '=', 'c.account_id').onRef('u.id', '=', 'c.user_id'),
    )
    .select([
      'c.digest',
      'c.account_id',
      'c.user_id',
      'c.kind',
      'u.username',
      'u.status',
      'u.attributes',
      'u.mfa_enrolled',
    ])
    .where('c.digest', '=', digest)
    .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', now)]))
    .where('u.status', 'in', USABLE_STATUSES),
)

/** The credential with this digest, if unexpired and its user may still act (hot path). */
export async function findUsable(
  db: Executor,
  digest: string,
  now: string,
): Promise<ActiveCredential | undefined> {
  const [row] = await findUsableQuery(db, digest, now)
  return row as ActiveCredential | undefined
}

const findUsableWithPoliciesQuery = precompiled((db: Executor, digest: string, now: string) =>
  db
    .selectFrom('credentials as c')
    .innerJoin('users as u', (j) =>
      j.onRef('u.account_id', '=', 'c.account_id').onRef('u.id', '=', 'c.user_id'),
    )
    .leftJoin('group_members as m', (j) =>
      j.onRef('m.account_id', '=', 'c.account_id').onRef('m.user_id', '=', 'c.user_id'),
    )
    .leftJoin('groups as g', (j) =>
      j.onRef('g.account_id', '=', 'm.account_id').onRef('g.id', '=', 'm.group_id'),
    )
    .select([
      'c.digest',
      'c.account_id',
      'c.user_id',
      'c.kind',
      'u.username',
      'u.status',
      'u.attributes',
      'u.mfa_enrolled',
      'g.policy',
    ])
    .where('c.digest', '=', digest)
    .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', now)]))
    .where('u.status', 'in', USABLE_STATUSES),
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
): Promise<{ credential: ActiveCredential; policies: string[] } | undefined> {
  const rows = await findUsableWithPoliciesQuery(db, digest, now)
  const [first] = rows
  if (!first) return undefined
  const { policy: _policy, ...credential } = first
  const policies = rows.flatMap((r) => (r.policy === null ? [] : [r.policy])).sort()
  return { credential: credential as ActiveCredential, policies }
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
  await db.insertInto('credentials').values(row).execute()
}

export async function deleteByDigest(db: Executor, accountId: string, digest: string) {
  const result = await db
    .deleteFrom('credentials')
    .where('account_id', '=', accountId)
    .where('digest', '=', digest)
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

export async function deleteForUser(
  db: Executor,
  accountId: string,
  userId: string,
  kind?: StoredCredentialKind,
): Promise<void> {
  let q = db
    .deleteFrom('credentials')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
  if (kind) q = q.where('kind', '=', kind)
  await q.execute()
}

/** Deletes the user's access tokens, all but `keepDigest` when given; returns how many. */
export async function deleteAccessTokens(
  db: Executor,
  accountId: string,
  userId: string,
  keepDigest?: string,
): Promise<number> {
  let q = db
    .deleteFrom('credentials')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('kind', '=', 'access_token')
  if (keepDigest !== undefined) q = q.where('digest', '!=', keepDigest)
  const result = await q.executeTakeFirst()
  return Number(result.numDeletedRows)
}
