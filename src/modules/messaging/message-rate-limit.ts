import type { Clock } from '../../lib/clock.js'
import { AppError, ErrorType } from '../../lib/errors.js'
import type { Executor } from '../../store/executor.js'
import { bumpWindow } from '../../store/window-counter.js'

/** Messages (email and SMS together) one user can be sent per hour (reliability R-25). */
export const MESSAGES_PER_USER = { max: 100, windowMs: 60 * 60_000 }

/**
 * Caps what anyone can send one user, whoever asks and on whichever node: a shared window
 * counter per (account, user), taken just before a provider is called.
 */
export class MessageRateLimit {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly limit = MESSAGES_PER_USER,
  ) {}

  async take(accountId: string, userId: string): Promise<void> {
    const counter = { scope: accountId, key: `message\n${accountId}\n${userId}` }
    const count = await bumpWindow(this.db, counter, this.clock.now(), this.limit.windowMs)
    if (count > this.limit.max) {
      throw new AppError(
        429,
        ErrorType.rateLimit,
        'TOO_MANY_MESSAGES',
        `At most ${this.limit.max} messages an hour can be sent to one user; try again later`,
      )
    }
  }
}
