import type { Executor } from './executor.js'
import { precompiled } from './precompiled.js'

/**
 * The credential directory: digest of a presented secret (API key, access token, SAT password)
 * → the account it belongs to. A request's credential carries no account, so this is its one
 * lookup not routed by account (the table is distributed by digest: one shard, by its key);
 * every later query of the request filters by the account found here.
 *
 * A row says only where to look: the account's own table (credentials, scoped_access_tokens)
 * decides whether the secret is still valid. So a row outliving its credential (a SAT deleted
 * with its parent by cascade, an expired token) grants nothing, and rows are written before
 * the credential they point to: a failure in between leaves such a harmless row, never a
 * credential that cannot be found.
 */
const accountOfQuery = precompiled((db: Executor, digest: string) =>
  db.selectFrom('credential_directory').select('account_id').where('digest', '=', digest),
)

/** The account of the secret with this digest, if one was issued (hot path). */
export async function accountOfDigest(db: Executor, digest: string): Promise<string | undefined> {
  const [row] = await accountOfQuery(db, digest)
  return row?.account_id
}

export async function addDigest(db: Executor, digest: string, accountId: string): Promise<void> {
  await db.insertInto('credential_directory').values({ digest, account_id: accountId }).execute()
}

/** Digests per delete statement: far below either engine's bound on parameters. */
const REMOVE_BATCH = 500

/** Forgets the given digests (their credentials were deleted); by key, one shard each. */
export async function removeDigests(db: Executor, digests: readonly string[]): Promise<void> {
  for (let i = 0; i < digests.length; i += REMOVE_BATCH) {
    const batch = digests.slice(i, i + REMOVE_BATCH)
    await db.deleteFrom('credential_directory').where('digest', 'in', batch).execute()
  }
}
