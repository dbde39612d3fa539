import type { RightsFeed } from '../store/rights-feed.js'

/** Most entries one cache keeps per process (least recently used dropped first). */
export const EXACT_CACHE_SIZE = 10_000
/**
 * Longest an entry is kept. Invalidation is exact without it (rights-feed.ts); it only bounds
 * how long an idle credential's user and policies (or an idle vault's row) stay in memory.
 */
export const EXACT_CACHE_TTL_MS = 60_000
/**
 * Most weight (roughly bytes: what `weigh` says) one cache keeps: group policies may be large
 * (up to the 1 MiB request body each), so entries are bounded by size as well as by count.
 */
export const EXACT_CACHE_MAX_WEIGHT = 32 * 1024 * 1024

interface Entry<T> {
  value: T
  weight: number
  /** Epoch ms after which the entry is not served (the credential's own end, or the TTL). */
  until: number
}

/**
 * What a request would otherwise read again (issue 21): resolved credentials, keyed by the
 * credential's digest — never the secret — and vault rows. Exact: every committed write that
 * may change a right empties it (the feed; on every node with PostgreSQL), a read that raced such a write is not stored (the
 * feed's epoch moved), nothing is served or stored while the feed is not trusted (fail closed),
 * and an entry ends no later than its credential does.
 */
export class ExactCache<T> {
  readonly #entries = new Map<string, Entry<T>>()
  #weight = 0

  constructor(
    private readonly feed: RightsFeed,
    private readonly options: {
      size?: number
      ttlMs?: number
      maxWeight?: number
      /** An entry's weight (default 1 each: bounded by count only). */
      weigh?: (value: T) => number
    } = {},
  ) {
    feed.subscribe(() => {
      this.#entries.clear()
      this.#weight = 0
    })
  }

  /** The entry for this key, if trusted and still live at `nowMs`. */
  get(key: string, nowMs: number): T | undefined {
    if (!this.feed.trusted) return undefined
    const entry = this.#entries.get(key)
    if (!entry) return undefined
    this.#entries.delete(key)
    if (entry.until <= nowMs) {
      this.#weight -= entry.weight
      return undefined
    }
    this.#entries.set(key, entry)
    return entry.value
  }

  /** Taken before reading the database; `set` stores only if nothing changed since. */
  ticket(): number {
    return this.feed.epoch
  }

  /** Stores what was read under `ticket`, live until `endsAtMs` at the latest. */
  set(key: string, value: T, nowMs: number, endsAtMs: number, ticket: number): void {
    if (!this.feed.trusted || this.feed.epoch !== ticket) return
    const until = Math.min(endsAtMs, nowMs + (this.options.ttlMs ?? EXACT_CACHE_TTL_MS))
    if (until <= nowMs) return
    const weight = this.options.weigh?.(value) ?? 1
    const maxWeight = this.options.maxWeight ?? EXACT_CACHE_MAX_WEIGHT
    if (weight > maxWeight) return
    this.#drop(key)
    this.#entries.set(key, { value, until, weight })
    this.#weight += weight
    const size = this.options.size ?? EXACT_CACHE_SIZE
    while (this.#entries.size > size || this.#weight > maxWeight)
      this.#drop(this.#entries.keys().next().value as string)
  }

  #drop(key: string): void {
    const entry = this.#entries.get(key)
    if (!entry) return
    this.#entries.delete(key)
    this.#weight -= entry.weight
  }

  get entries(): number {
    return this.#entries.size
  }
}
