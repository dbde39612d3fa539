import { outsideDeadline } from '../../store/request-deadline.js'
import type { Increment } from './metering.repo.js'

interface Waiter {
  resolve: () => void
  reject: (error: unknown) => void
}

/**
 * Group commit of counter increments: each request's increment joins the batch being gathered
 * and its promise settles when that batch is stored (or fails with it). One write runs at a time;
 * increments arriving meanwhile form the next batch, so under load many requests share one
 * statement, and at rest a request waits for its own. Exact and durable: a request is answered
 * only once its count is in the database, never from a buffer a crash would lose.
 */
export class GroupCommit {
  #pending = new Map<string, Increment>()
  #waiters: Waiter[] = []
  #running = false

  constructor(
    /** Stores a whole batch atomically (all of it or nothing). */
    private readonly write: (batch: Increment[]) => Promise<void>,
  ) {}

  add(increment: Increment): Promise<void> {
    const key = `${increment.accountId}\u0000${increment.day}\u0000${increment.category}`
    const had = this.#pending.get(key)
    this.#pending.set(key, had ? { ...had, n: had.n + increment.n } : { ...increment })
    const done = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }))
    if (!this.#running) {
      this.#running = true
      // Shared by the requests of the batch: under none of their deadlines.
      outsideDeadline(() => setImmediate(() => void this.#drain()))
    }
    return done
  }

  async #drain(): Promise<void> {
    while (this.#pending.size > 0) {
      const batch = [...this.#pending.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([, increment]) => increment)
      const waiters = this.#waiters
      this.#pending = new Map()
      this.#waiters = []
      try {
        await this.write(batch)
        for (const w of waiters) w.resolve()
      } catch (error) {
        // Nothing of the batch was stored: its requests fail, and so count nothing.
        for (const w of waiters) w.reject(error)
      }
    }
    this.#running = false
  }
}
