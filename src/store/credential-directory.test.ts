import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openTestStore } from '../../test/helpers/store.js'
import {
  addDigest,
  ROUTE_CACHE_SIZE,
  removeDigests,
  routeByDigest,
} from './credential-directory.repo.js'
import type { Store } from './db.js'

let store: Store
beforeAll(async () => {
  store = await openTestStore()
  for (const id of ['acc-a', 'acc-b'])
    await store.db.insertInto('accounts').values({ id, created_at: 'x' }).execute()
})
afterAll(() => store?.close())

/** Stands in for an account-routed lookup: the credential's owner, if `accountId` holds it. */
const holders = new Map<string, string>()
const find = (digest: string) => (accountId: string) =>
  Promise.resolve(holders.get(digest) === accountId ? { accountId } : undefined)

describe('routeByDigest', () => {
  it('finds the account through the directory, and nothing for an unknown digest', async () => {
    await addDigest(store.db, 'd-1', 'acc-a')
    holders.set('d-1', 'acc-a')
    expect(await routeByDigest(store.db, 'd-1', find('d-1'))).toEqual({ accountId: 'acc-a' })
    expect(await routeByDigest(store.db, 'unknown', find('unknown'))).toBeUndefined()
  })

  it('remembers the account of a found digest: a repeat caller skips the directory', async () => {
    await addDigest(store.db, 'd-2', 'acc-a')
    holders.set('d-2', 'acc-a')
    expect(await routeByDigest(store.db, 'd-2', find('d-2'))).toEqual({ accountId: 'acc-a' })
    await removeDigests(store.db, ['d-2'])
    expect(await routeByDigest(store.db, 'd-2', find('d-2'))).toEqual({ accountId: 'acc-a' })
  })

  it('asks the directory again when the remembered account no longer holds the digest', async () => {
    await addDigest(store.db, 'd-3', 'acc-a')
    holders.set('d-3', 'acc-a')
    await routeByDigest(store.db, 'd-3', find('d-3'))
    await removeDigests(store.db, ['d-3'])
    await addDigest(store.db, 'd-3', 'acc-b')
    holders.set('d-3', 'acc-b')
    expect(await routeByDigest(store.db, 'd-3', find('d-3'))).toEqual({ accountId: 'acc-b' })
    // Gone everywhere: nothing, however it was remembered.
    holders.delete('d-3')
    expect(await routeByDigest(store.db, 'd-3', find('d-3'))).toBeUndefined()
  })

  it(`remembers at most ${ROUTE_CACHE_SIZE} digests, the least recently used leaving first`, async () => {
    const digests = Array.from({ length: ROUTE_CACHE_SIZE + 1 }, (_, i) => `bound-${i}`)
    for (let i = 0; i < digests.length; i += 500)
      await store.db
        .insertInto('credential_directory')
        .values(digests.slice(i, i + 500).map((digest) => ({ digest, account_id: 'acc-a' })))
        .execute()
    for (const d of digests) holders.set(d, 'acc-a')
    // The first is used again before the others: it is the most recently used, not the first out.
    for (const d of digests.slice(0, ROUTE_CACHE_SIZE)) await routeByDigest(store.db, d, find(d))
    await routeByDigest(store.db, 'bound-0', find('bound-0'))
    await routeByDigest(store.db, digests.at(-1) as string, find(digests.at(-1) as string))
    await removeDigests(store.db, digests)
    // Remembered: the re-used first and the newest. Forgotten: the second, least recently used.
    expect(await routeByDigest(store.db, 'bound-0', find('bound-0'))).toBeDefined()
    const newest = digests.at(-1) as string
    expect(await routeByDigest(store.db, newest, find(newest))).toBeDefined()
    expect(await routeByDigest(store.db, 'bound-1', find('bound-1'))).toBeUndefined()
    expect(await routeByDigest(store.db, 'bound-2', find('bound-2'))).toBeDefined()
  }, 60_000)
})
