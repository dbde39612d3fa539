import type { DialectAdapter } from 'kysely'
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

/** The account of the secret with this digest, if one was issued. */
export async function accountOfDigest(db: Executor, digest: string): Promise<string | undefined> {
  const [row] = await accountOfQuery(db, digest)
  return row?.account_id
}

/** Digests whose account this process remembers, per database (most recently used last). */
export const ROUTE_CACHE_SIZE = 10_000
const routeCaches = new WeakMap<DialectAdapter, Map<string, string>>()

/**
 * `find` run in the account of the secret with this digest (hot path: every request). A digest
 * names the same account for as long as it exists, so the account is remembered (a bounded,
 * least-recently-used map per database) and a repeat caller skips the directory. The cache is
 * never trusted alone: when `find` finds nothing in a remembered account, the directory is
 * asked again. Only digests found in the directory enter it, so wrong secrets cannot fill it.
 */
export async function routeByDigest<T>(
  db: Executor,
  digest: string,
  find: (accountId: string) => Promise<T | undefined>,
): Promise<T | undefined> {
  const adapter = db.getExecutor().adapter
  let cache = routeCaches.get(adapter)
  if (!cache) {
    cache = new Map()
    routeCaches.set(adapter, cache)
  }
  const remembered = cache.get(digest)
  if (remembered !== undefined) {
    cache.delete(digest)
    const found = await find(remembered)
    if (found !== undefined) {
      cache.set(digest, remembered)
      return found
    }
  }
  const accountId = await accountOfDigest(db, digest)
  if (accountId === undefined) return undefined
  const found = accountId === remembered ? undefined : await find(accountId)
  if (found !== undefined) {
    cache.set(digest, accountId)
    if (cache.size > ROUTE_CACHE_SIZE) cache.delete(cache.keys().next().value as string)
  }
  return found
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
