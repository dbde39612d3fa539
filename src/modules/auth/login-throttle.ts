import { sql } from 'kysely'
import { digestSecret } from '../../crypto/secrets.js'
import { clientNetwork } from '../../lib/client-network.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import type { Executor } from '../../store/executor.js'
import { bumpWindowsAt } from '../../store/window-counter.js'

/**
 * Login failure limits, checked before any password hashing so a flood costs no argon2 work.
 * - per client address (its /64 for IPv6), whatever the account or username: 50 failures per
 *   15 minutes by default (configurable), so rotating usernames buys nothing;
 * - per (account, username, client address): 10 failures per 15 minutes;
 * - every login of the server together: 600 failures per minute by default (configurable), which
 *   bounds the argon2 work a flood from many addresses can cause; a client that has logged in to
 *   the user before is spared, so a flood cannot lock known users out;
 * - per (account, username) from all clients: 100 failures per hour (ASVS 4.0 2.2.1), except
 *   that a client that has logged in to that user before keeps its own allowance, so an attacker
 *   cannot lock a victim out from everywhere.
 * Counters live in the database so every node behind a load balancer shares them. Each attempt
 * is counted (one atomic upsert) *before* its password is verified, so concurrent attempts cannot
 * all pass a check made before any of them was recorded; a successful login un-counts itself.
 * A refusal carries `Retry-After`: the seconds until the spent window ends.
 */
export const PER_CLIENT = { max: 10, windowMs: 15 * 60_000 }
export const PER_USER = { max: 100, windowMs: 60 * 60_000 }

export interface WindowLimit {
  max: number
  windowMs: number
}

/** The limits an operator sets (config.ts); the two above are fixed. */
export interface LoginLimits {
  perAddress: WindowLimit
  global: WindowLimit
}

export const DEFAULT_LOGIN_LIMITS: LoginLimits = {
  perAddress: { max: 50, windowMs: 15 * 60_000 },
  global: { max: 600, windowMs: 60_000 },
}

export interface LoginAttempt {
  accountId: string
  username: string
  client: string
}

const clientKey = (a: LoginAttempt) =>
  digestSecret(`client\n${a.accountId}\n${a.username}\n${a.client}`)
const userKey = (a: LoginAttempt) => digestSecret(`user\n${a.accountId}\n${a.username}`)
const addressKey = (a: LoginAttempt) => digestSecret(`address\n${clientNetwork(a.client)}`)
/** One row for the whole server (every node shares it through the database). */
const GLOBAL_KEY = digestSecret('global-login-failures')
const clientDigest = (client: string) => digestSecret(`ip\n${client}`)

export class LoginThrottle {
  readonly #limits: LoginLimits

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    limits: LoginLimits = DEFAULT_LOGIN_LIMITS,
  ) {
    this.#limits = limits
  }

  /**
   * Counts this attempt in every window and throws 429 when one is spent: the per-address and
   * per-(user, client) limits always; the server-wide and per-user ones unless this client has
   * logged in to the user before. All four counts are one statement, so an attempt costs one
   * round trip and one commit (one fsync on SQLite, whose writes block the event loop) however
   * many windows it counts in, and the row every login shares is locked only for that statement.
   */
  async admit(a: LoginAttempt, userId: string | undefined): Promise<void> {
    const now = this.clock.now()
    const windows = [
      { key: addressKey(a), limit: this.#limits.perAddress, spareKnown: false },
      { key: clientKey(a), limit: PER_CLIENT, spareKnown: false },
      { key: GLOBAL_KEY, limit: this.#limits.global, spareKnown: true },
      { key: userKey(a), limit: PER_USER, spareKnown: true },
    ]
    const counts = await bumpWindowsAt(
      this.db,
      windows.map((w) => ({ key: w.key, windowMs: w.limit.windowMs })),
      now,
    )
    const counted = windows.map((w, i) => {
      const { count, windowEndsAt } = counts[i] as (typeof counts)[number]
      const retryAfter =
        count <= w.limit.max
          ? undefined
          : Math.max(1, Math.ceil((windowEndsAt.getTime() - now.getTime()) / 1000))
      return { retryAfter, spareKnown: w.spareKnown }
    })
    const spent = counted.filter((c) => c.retryAfter !== undefined)
    if (spent.length === 0) return
    const retryAfter = Math.max(...spent.map((c) => c.retryAfter as number))
    if (spent.some((c) => !c.spareKnown)) throw errors.rateLimited(retryAfter)
    if (!userId || !(await this.#isKnownClient(a.accountId, userId, a.client)))
      throw errors.rateLimited(retryAfter)
  }

  /** The attempt was already counted by admit. */
  async recordFailure(_a: LoginAttempt): Promise<void> {
    // Counters of random usernames must not pile up: prune expired ones now and then.
    if (Math.random() < 0.01) await this.prune()
  }

  async recordSuccess(a: LoginAttempt, userId: string): Promise<void> {
    // One commit, as in admit.
    await this.db.transaction().execute((trx) => this.#recordSuccess(trx, a, userId))
  }

  async #recordSuccess(db: Executor, a: LoginAttempt, userId: string): Promise<void> {
    const now = this.clock.now().toISOString()
    await db.deleteFrom('login_throttle').where('key', '=', clientKey(a)).execute()
    // A success is not a failure: take back the count admit added to the shared windows.
    await db
      .updateTable('login_throttle')
      .set({ failures: sql`failures - 1` })
      .where('key', 'in', [userKey(a), addressKey(a), GLOBAL_KEY])
      .where('failures', '>', 0)
      .execute()
    await db
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
    // Rows of other counters share the table (messaging): keep anything a login window may need.
    const longest = Math.max(
      PER_USER.windowMs,
      PER_CLIENT.windowMs,
      this.#limits.perAddress.windowMs,
      this.#limits.global.windowMs,
    )
    const cutoff = new Date(this.clock.now().getTime() - longest).toISOString()
    await this.db.deleteFrom('login_throttle').where('window_started_at', '<', cutoff).execute()
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
