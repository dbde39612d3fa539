/**
 * Login windows this process has seen spent, remembered until they end, so a flood's further
 * attempts are refused without touching the database: on SQLite every counted attempt is a
 * commit (an fsync on the event loop), and a flood of them slowed every other request.
 *
 * Only for windows whose verdict cannot change before they end: the per-address and server-wide
 * ones, from which settled failures are never taken back (a success forgives only its own
 * client's window). Refusing from memory is never wrong then; at worst another node has not
 * seen the window spent yet and asks the database once. Bounded: the oldest entry goes first.
 */
export class SpentWindows {
  readonly #endsAt = new Map<string, number>()

  constructor(private readonly maxEntries = 10_000) {}

  note(key: string, endsAt: Date): void {
    this.#endsAt.delete(key)
    if (this.#endsAt.size >= this.maxEntries) {
      const oldest = this.#endsAt.keys().next().value
      if (oldest !== undefined) this.#endsAt.delete(oldest)
    }
    this.#endsAt.set(key, endsAt.getTime())
  }

  /** Seconds until the window ends, when it is known spent; undefined otherwise. */
  retryAfter(key: string, now: Date): number | undefined {
    const endsAt = this.#endsAt.get(key)
    if (endsAt === undefined) return undefined
    if (endsAt <= now.getTime()) {
      this.#endsAt.delete(key)
      return undefined
    }
    return Math.max(1, Math.ceil((endsAt - now.getTime()) / 1000))
  }
}
