import { sql } from 'kysely'
import { digestSecret } from '../../crypto/secrets.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import type { Executor } from '../../store/executor.js'
import { bumpWindow } from '../../store/window-counter.js'

/**
 * Login failure limits, checked before any password hashing so a flood costs no argon2 work.
 * - per (account, username, client address): 10 failures per 15 minutes;
 * - per (account, username) from all clients: 100 failures per hour (ASVS 4.0 2.2.1), except
 *   that a client that has logged in to that user before keeps its own allowance, so an attacker
 *   cannot lock a victim out from everywhere.
 * Counters live in the database so every node behind a load balancer shares them. Each attempt
 * is counted (one atomic upsert) *before* its password is verified, so concurrent attempts cannot
 * all pass a check made before any of them was recorded; a successful login un-counts itself.
 */
export const PER_CLIENT = { max: 10, windowMs: 15 * 60_000 }
export const PER_USER = { max: 100, windowMs: 60 * 60_000 }

export interface LoginAttempt {
  accountId: string
  username: string
  client: string
}

const clientKey = (a: LoginAttempt) =>
  digestSecret(`client\n${a.accountId}\n${a.username}\n${a.client}`)
const userKey = (a: LoginAttempt) => digestSecret(`user\n${a.accountId}\n${a.username}`)
const clientDigest = (client: string) => digestSecret(`ip\n${client}`)

export class LoginThrottle {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
  ) {}

  /** Counts this attempt for the client; throws 429 when the per-client limit is spent. */
  async assertClientAllowed(a: LoginAttempt): Promise<void> {
    if ((await this.#bump(clientKey(a), this.clock.now(), PER_CLIENT.windowMs)) > PER_CLIENT.max)
      throw errors.rateLimited()
  }

  /**
   * Counts this attempt for the user; throws 429 when the per-user limit is spent and this client
   * is not a known one of the user.
   */
  async assertUserAllowed(a: LoginAttempt, userId: string | undefined): Promise<void> {
    if ((await this.#bump(userKey(a), this.clock.now(), PER_USER.windowMs)) <= PER_USER.max) return
    if (userId && (await this.#isKnownClient(a.accountId, userId, a.client))) return
    throw errors.rateLimited()
  }

  /** The attempt was already counted by the two checks above. */
  async recordFailure(_a: LoginAttempt): Promise<void> {
    // Counters of random usernames must not pile up: prune expired ones now and then.
    if (Math.random() < 0.01) await this.prune()
  }

  async recordSuccess(a: LoginAttempt, userId: string): Promise<void> {
    const now = this.clock.now().toISOString()
    await this.db.deleteFrom('login_throttle').where('key', '=', clientKey(a)).execute()
    // A success is not a failure: take back the count its check added to the user's window.
    await this.db
      .updateTable('login_throttle')
      .set({ failures: sql`failures - 1` })
      .where('key', '=', userKey(a))
      .where('failures', '>', 0)
      .execute()
    await this.db
      .insertInto('login_known_clients')
      .values({
        account_id: a.accountId,
        user_id: userId,
        client_digest: clientDigest(a.client),
        last_success_at: now,
      })
      .onConflict((oc) =>
        oc
          .columns(['account_id', 'user_id', 'client_digest'])
          .doUpdateSet({ last_success_at: now }),
      )
      .execute()
  }

  async prune(): Promise<void> {
    const cutoff = new Date(this.clock.now().getTime() - PER_USER.windowMs).toISOString()
    await this.db.deleteFrom('login_throttle').where('window_started_at', '<', cutoff).execute()
  }

  #bump(key: string, now: Date, windowMs: number): Promise<number> {
    return bumpWindow(this.db, key, now, windowMs)
  }

  async #isKnownClient(accountId: string, userId: string, client: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('login_known_clients')
      .select('user_id')
      .where('account_id', '=', accountId)
      .where('user_id', '=', userId)
      .where('client_digest', '=', clientDigest(client))
      .executeTakeFirst()
    return row !== undefined
  }
}
