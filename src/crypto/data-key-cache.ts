/** Most unwrapped data keys a process keeps (one per account, two or three after `keys reencrypt`). */
export const DATA_KEY_CACHE_SIZE = 100_000
/**
 * How long the keys of an account `preload` loaded are kept whatever the bound: work inside a
 * transaction reads keys only from memory (on SQLite the transaction holds the one connection, so
 * a key read from the store there would wait for itself), and each such batch preloads first.
 */
export const PRELOAD_HOLD_MS = 60_000

/**
 * Unwrapped data keys by account and key id, the least recently used dropped first past `size`.
 * Nothing here is ever stale: a data key id names one key for good (rotation re-wraps the same
 * bytes under another master key, `keys reencrypt` adds a key and keeps the old one), so the
 * bound only limits memory; a dropped key is unwrapped again from the store when next needed.
 */
export class DataKeyCache {
  readonly #keys = new Map<string, Buffer>()
  /**
   * The newest entry (the end of the LRU order): a get of it needs neither its map name built
   * nor a move. A page of documents reads one account's key once per document, and a get was
   * ~400 ns (a name concatenated and hashed, then a delete and an insert to move it), most of a
   * list's key lookups (issue 21); this one is a comparison of two strings.
   */
  #newest: { accountId: string; keyId: string; name: string; key: Buffer } | undefined
  /** Accounts preloaded, and until when (ms) their keys are held. */
  readonly #held = new Map<string, number>()

  constructor(
    private readonly now: () => number,
    private readonly size = DATA_KEY_CACHE_SIZE,
  ) {}

  get(accountId: string, keyId: string): Buffer | undefined {
    const newest = this.#newest
    if (newest && newest.keyId === keyId && newest.accountId === accountId) return newest.key
    const name = nameOf(accountId, keyId)
    const key = this.#keys.get(name)
    if (key) {
      this.#keys.delete(name)
      this.#keys.set(name, key)
      this.#newest = { accountId, keyId, name, key }
    }
    return key
  }

  has(accountId: string, keyId: string): boolean {
    return this.#keys.has(nameOf(accountId, keyId))
  }

  set(accountId: string, keyId: string, key: Buffer): void {
    const name = nameOf(accountId, keyId)
    this.#keys.delete(name)
    this.#keys.set(name, key)
    this.#newest = { accountId, keyId, name, key }
    this.#evict()
  }

  /** The account's keys stay at least PRELOAD_HOLD_MS from now (a batch is about to use them). */
  hold(accountId: string): void {
    this.#held.set(accountId, this.now() + PRELOAD_HOLD_MS)
  }

  get entries(): number {
    return this.#keys.size
  }

  #evict(): void {
    if (this.#keys.size <= this.size) return
    const now = this.now()
    for (const [account, until] of this.#held) if (until <= now) this.#held.delete(account)
    // Oldest first; a held account's key moves to the newest end. Every key is looked at once
    // at most: when all are held the cache stays over its bound until a hold ends.
    let looked = this.#keys.size
    while (this.#keys.size > this.size && looked-- > 0) {
      const [name, key] = this.#keys.entries().next().value as [string, Buffer]
      this.#keys.delete(name)
      if (this.#held.has(accountOf(name))) {
        this.#keys.set(name, key)
        // Another entry is the newest now: the next get takes the map's way (and moves).
        this.#newest = undefined
      } else if (this.#newest?.name === name) this.#newest = undefined
    }
  }
}

const nameOf = (accountId: string, keyId: string) => `${accountId}\n${keyId}`
const accountOf = (name: string) => name.slice(0, name.indexOf('\n'))
