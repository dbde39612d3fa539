import type { Executor } from '../../store/executor.js'

export type StoredCredentialKind = 'api_key' | 'access_token'

export interface ActiveCredential {
  digest: string
  account_id: string
  user_id: string
  kind: StoredCredentialKind
}

/** Credentials of users whose status still lets them act (LOCKED and DEACTIVATED cannot). */
const USABLE_STATUSES = ['ACTIVATED', 'PENDING']

export async function findUsable(
  db: Executor,
  digest: string,
  now: string,
): Promise<ActiveCredential | undefined> {
  const row = await db
    .selectFrom('credentials as c')
    .innerJoin('users as u', (j) =>
      j.onRef('u.account_id', '=', 'c.account_id').onRef('u.id', '=', 'c.user_id'),
    )
    .select(['c.digest', 'c.account_id', 'c.user_id', 'c.kind'])
    .where('c.digest', '=', digest)
    .where((eb) => eb.or([eb('c.expires_at', 'is', null), eb('c.expires_at', '>', now)]))
    .where('u.status', 'in', USABLE_STATUSES)
    .executeTakeFirst()
  return row as ActiveCredential | undefined
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
