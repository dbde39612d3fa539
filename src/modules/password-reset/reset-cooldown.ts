import { digestSecret } from '../../crypto/secrets.js'
import type { Clock } from '../../lib/clock.js'
import type { Executor } from '../../store/executor.js'
import { bumpWindow, releaseWindow } from '../../store/window-counter.js'

/**
 * "At most one reset email a minute per user and flow" as one atomic claim: a shared window
 * counter (one upsert on a unique key, on any node) lets exactly one of any number of
 * concurrent requests through per window. A check-then-insert on the reset tokens let 2–3 of
 * 20 concurrent requests each send an email with its own valid link.
 */
export class ResetCooldown {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly windowMs: number,
  ) {}

  /** True for the one request of the window that may send; false for every other. */
  async claim(accountId: string, flowId: string, userId: string): Promise<boolean> {
    const count = await bumpWindow(
      this.db,
      keyOf(accountId, flowId, userId),
      this.clock.now(),
      this.windowMs,
    )
    return count === 1
  }

  /** The email was not sent after all: the next request may try again at once. */
  async release(accountId: string, flowId: string, userId: string): Promise<void> {
    await releaseWindow(this.db, keyOf(accountId, flowId, userId))
  }
}

// Digested like every other counter key: the table never holds ids in the clear. Counted in
// the account's scope (its shard).
const keyOf = (accountId: string, flowId: string, userId: string) => ({
  scope: accountId,
  key: digestSecret(`password-reset-email\n${accountId}\n${flowId}\n${userId}`),
})
