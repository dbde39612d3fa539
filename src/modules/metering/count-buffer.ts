import { outsideDeadline } from '../../store/request-deadline.js'
import type { Increment } from './metering.repo.js'

const keyOf = (i: Pick<Increment, 'accountId' | 'day' | 'category'>) =>
  `${i.accountId}\u0000${i.day}\u0000${i.category}`

/**
 * The counts a node has taken and not yet stored: increments of one key are merged in memory and
 * written together at most `intervalMs` after the first of them (and on `flush`, which the app
 * calls when it closes), one batch at a time. A request never waits for the database here: the
 * count costs the document read nothing measurable. A batch that cannot be stored goes back into
 * the buffer and is tried again at the next interval, so a passing database failure loses
 * nothing; a crash loses at most the last interval's counts (decisions: the audit event of each
 * request carries its count durably).
 */
export class CountBuffer {
  #pending = new Map<string, Increment>()
  /** The batch being written: not stored yet, no longer pending, still counted by `pendingFor`. */
  #writing: Increment[] = []
  #flushing: Promise<void> | undefined
  #timer: NodeJS.Timeout | undefined

  constructor(
    /** Stores a whole batch atomically (all of it or nothing). */
    private readonly write: (batch: Increment[]) => Promise<void>,
    private readonly intervalMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  add(increment: Increment): void {
    this.#merge(increment)
    this.#schedule()
  }

  /** Operations taken for the account on `day` and not yet stored (the quota check adds them). */
  pendingFor(accountId: string, day: string): number {
    let n = 0
    for (const i of [...this.#pending.values(), ...this.#writing])
      if (i.accountId === accountId && i.day === day) n += i.n
    return n
  }

  /** Writes everything taken so far (after a write already running); rejects if it fails. */
  async flush(): Promise<void> {
    while (this.#flushing !== undefined) await this.#flushing.catch(() => undefined)
    if (this.#pending.size === 0) return
    // Sorted keys: two nodes lock shared rows in the same order (no deadlock on PostgreSQL).
    const batch = [...this.#pending.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, increment]) => increment)
    this.#pending = new Map()
    this.#writing = batch
    const run = (async () => {
      try {
        // Shared by many requests: under none of their deadlines.
        await outsideDeadline(() => this.write(batch))
      } catch (error) {
        for (const increment of batch) this.#merge(increment)
        throw error
      } finally {
        this.#writing = []
        this.#flushing = undefined
        this.#schedule()
      }
    })()
    this.#flushing = run
    return run
  }

  #merge(increment: Increment): void {
    const key = keyOf(increment)
    const had = this.#pending.get(key)
    // A pending entry is this buffer's own copy (a flush takes the whole map): added to in place.
    if (had) had.n += increment.n
    else this.#pending.set(key, { ...increment })
  }

  #schedule(): void {
    if (this.#timer || this.#pending.size === 0) return
    // Created outside the request's context, so the write never runs under its deadline.
    this.#timer = outsideDeadline(() =>
      setTimeout(() => {
        this.#timer = undefined
        this.flush().catch(this.onError)
      }, this.intervalMs),
    )
    // The buffer never keeps a process alive; the app flushes it when it closes.
    this.#timer.unref()
  }
}
