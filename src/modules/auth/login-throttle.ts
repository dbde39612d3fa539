import { digestSecret } from '../../crypto/secrets.js'
import { clientNetwork } from '../../lib/client-network.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import type { Executor } from '../../store/executor.js'
import {
  bumpAttemptsAt,
  type CounterKey,
  peekAttempts,
  SERVER_SCOPE,
  settleAttempts,
} from '../../store/window-counter.js'
import { SpentWindows } from './spent-windows.js'

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
  /** Default DEFAULT_IN_FLIGHT_WAIT_MS. */
  inFlightWaitMs?: number
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

/**
 * How long an attempt waits for attempts in flight to settle before answering 503
 * (COFFER_LOGIN_IN_FLIGHT_WAIT_MS).
 */
export const DEFAULT_IN_FLIGHT_WAIT_MS = 5000
/** A waiting attempt looks again after this (doubling up to the max), or when woken. */
const FIRST_PAUSE_MS = 20
const MAX_PAUSE_MS = 250

interface CountedWindow extends CounterKey {
  windowMs: number
  limit: WindowLimit
  spareKnown: boolean
  /** Its verdict cannot change before it ends once spent (see SpentWindows). */
  remembered: boolean
}

async function verdictOf(
  c: { count: number; inFlight: number },
  w: CountedWindow,
  isKnown: () => Promise<boolean>,
): Promise<Verdict> {
  if (c.count <= w.limit.max) return 'ok'
  if (w.spareKnown && (await isKnown())) return 'spared'
  // Failures already settled (neither this attempt nor others in flight) spend the window.
  return c.count - c.inFlight >= w.limit.max ? 'spent' : 'busy'
}

const retryAfterOf = (windowEndsAt: Date, now: Date) =>
  Math.max(1, Math.ceil((windowEndsAt.getTime() - now.getTime()) / 1000))

// Per-account windows count in the account's scope (its shard); the per-address and server-wide
// ones span every account, so they count in SERVER_SCOPE.
const clientKey = (a: LoginAttempt): CounterKey => ({
  scope: a.accountId,
  key: digestSecret(`client\n${a.accountId}\n${a.username}\n${a.client}`),
})
const userKey = (a: LoginAttempt): CounterKey => ({
  scope: a.accountId,
  key: digestSecret(`user\n${a.accountId}\n${a.username}`),
})
const addressKey = (a: LoginAttempt): CounterKey => ({
  scope: SERVER_SCOPE,
  key: digestSecret(`address\n${clientNetwork(a.client)}`),
})
/** One row for the whole server (every node shares it through the database). */
const GLOBAL_KEY: CounterKey = { scope: SERVER_SCOPE, key: digestSecret('global-login-failures') }
const clientDigest = (client: string) => digestSecret(`ip\n${client}`)

type Verdict = 'ok' | 'spared' | 'spent' | 'busy'

export class LoginThrottle {
  readonly #limits: LoginLimits
  readonly #waitMs: number
  /** Attempts of this process waiting for an in-flight one to settle, oldest first. */
  readonly #waiters: (() => void)[] = []
  readonly #spent = new SpentWindows()

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    limits: LoginLimits = DEFAULT_LOGIN_LIMITS,
  ) {
    this.#limits = limits
    this.#waitMs = limits.inFlightWaitMs ?? DEFAULT_IN_FLIGHT_WAIT_MS
  }

  /**
   * Counts this attempt in every window, as a failure until it settles, and throws 429 when one
   * is spent: the per-address and per-(user, client) limits always; the server-wide and per-user
   * ones unless this client has logged in to the user before. All four counts are one statement,
   * so an attempt costs one round trip and one commit however many windows it counts in.
   *
   * A window spent only because attempts are still in flight (their passwords being checked)
   * does not refuse: those may all be right, and right passwords must never count as failures.
   * The attempt takes its count back and waits (woken when one of this process settles, else
   * polling for other nodes') up to the in-flight wait, then answers 503. So a flood of guesses
   * still gets no more than the limit hashed, and concurrent right logins all pass.
   */
  async admit(a: LoginAttempt, userId: string | undefined): Promise<void> {
    const windows = this.#windows(a)
    // Real elapsed time, not the (possibly manual) clock of the windows.
    const deadline = performance.now() + this.#waitMs
    let known: boolean | undefined
    const isKnown = async () => {
      known ??= userId !== undefined && (await this.#isKnownClient(a.accountId, userId, a.client))
      return known
    }
    await this.#refuseIfKnownSpent(windows, isKnown)
    for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
      const now = this.clock.now()
      const counts = await bumpAttemptsAt(this.db, windows, now)
      const verdicts: Verdict[] = []
      for (const [i, w] of windows.entries()) {
        const c = counts[i] as (typeof counts)[number]
        verdicts.push(await verdictOf(c, w, isKnown))
      }
      if (verdicts.includes('spent')) {
        // Refused: it stays counted as a failure, and is no longer in flight.
        await this.#settle(windows, false)
        const spent = counts.filter((_, i) => verdicts[i] === 'spent')
        for (const [i, w] of windows.entries()) {
          const c = counts[i] as (typeof counts)[number]
          if (verdicts[i] === 'spent' && w.remembered) this.#spent.note(w.key, c.windowEndsAt)
        }
        throw errors.rateLimited(Math.max(...spent.map((c) => retryAfterOf(c.windowEndsAt, now))))
      }
      if (!verdicts.includes('busy')) return
      await this.#settle(windows, true)
      if (performance.now() >= deadline) throw errors.busy('login attempts in flight', 1)
      await this.#waitForRoom(windows, isKnown, deadline, pause)
    }
  }

  /**
   * A window this process already saw spent refuses at once, with no database write: once the
   * address or server-wide budget is gone, a flood costs neither hashing nor commits.
   */
  async #refuseIfKnownSpent(
    windows: CountedWindow[],
    isKnown: () => Promise<boolean>,
  ): Promise<void> {
    const now = this.clock.now()
    for (const w of windows) {
      const retryAfter = w.remembered ? this.#spent.retryAfter(w.key, now) : undefined
      if (retryAfter === undefined) continue
      if (!w.spareKnown || !(await isKnown())) throw errors.rateLimited(retryAfter)
    }
  }

  /** The password (or MFA code) was wrong: the attempt stays counted as a failure. */
  async recordFailure(a: LoginAttempt): Promise<void> {
    await this.#settle(this.#windows(a), false)
    // Counters of random usernames must not pile up: prune expired ones now and then.
    if (Math.random() < 0.01) await this.prune()
  }

  /** The attempt reached no verdict (e.g. the hashing queue was full): it never happened. */
  async abandon(a: LoginAttempt): Promise<void> {
    await this.#settle(this.#windows(a), true)
  }

  async recordSuccess(a: LoginAttempt, userId: string): Promise<void> {
    // One commit, as in admit.
    await this.db.transaction().execute((trx) => this.#recordSuccess(trx, a, userId))
    this.#wakeOne()
  }

  #windows(a: LoginAttempt): CountedWindow[] {
    return [
      {
        ...addressKey(a),
        windowMs: this.#limits.perAddress.windowMs,
        limit: this.#limits.perAddress,
        spareKnown: false,
        remembered: true,
      },
      {
        ...clientKey(a),
        windowMs: PER_CLIENT.windowMs,
        limit: PER_CLIENT,
        spareKnown: false,
        // A success forgives its own client's failures: this window can reopen early.
        remembered: false,
      },
      {
        ...GLOBAL_KEY,
        windowMs: this.#limits.global.windowMs,
        limit: this.#limits.global,
        spareKnown: true,
        remembered: true,
      },
      {
        ...userKey(a),
        windowMs: PER_USER.windowMs,
        limit: PER_USER,
        spareKnown: true,
        remembered: false,
      },
    ]
  }

  async #settle(windows: CountedWindow[], uncount: boolean): Promise<void> {
    await settleAttempts(this.db, windows, uncount)
    this.#wakeOne()
  }

  /** Waits until the counts leave room for this attempt, a settle here wakes it, or time is up. */
  async #waitForRoom(
    windows: CountedWindow[],
    isKnown: () => Promise<boolean>,
    deadline: number,
    pause: number,
  ): Promise<void> {
    for (;;) {
      const left = deadline - performance.now()
      if (left <= 0) return
      await this.#sleep(Math.min(left, pause * (0.5 + Math.random())))
      // Look before counting again: a waiting attempt costs a read, not a write.
      const counts = await peekAttempts(this.db, windows, this.clock.now())
      let room = true
      for (const [i, w] of windows.entries()) {
        const c = counts[i] as (typeof counts)[number]
        if (c.count + 1 > w.limit.max && !(w.spareKnown && (await isKnown()))) room = false
      }
      if (room) return
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        const i = this.#waiters.indexOf(done)
        if (i >= 0) this.#waiters.splice(i, 1)
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.#waiters.push(done)
    })
  }

  /** One attempt settled, so there is room for one more: the longest waiting one looks. */
  #wakeOne(): void {
    this.#waiters[0]?.()
  }

  async #recordSuccess(db: Executor, a: LoginAttempt, userId: string): Promise<void> {
    const now = this.clock.now().toISOString()
    // A success is not a failure: take back the count admit added, and forgive this client's
    // settled failures (attempts still in flight stay counted).
    await settleAttempts(
      db,
      [addressKey(a), clientKey(a), GLOBAL_KEY, userKey(a)],
      true,
      clientKey(a).key,
    )
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
