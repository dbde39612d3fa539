import { type ExpressionBuilder, PostgresAdapter, sql } from 'kysely'
import type { Executor } from './executor.js'
import type { Database } from './schema.js'

/**
 * Fixed-window counters shared by every node through the database (table `login_throttle`,
 * which holds login failures and message counts alike under distinct keys).
 *
 * Each counter lives in a scope: the account it counts in, so its row sits in that account's
 * shard, or SERVER_SCOPE for a window over every account (per client address, all logins).
 *
 * `bump` is one atomic upsert: a new window starts when the old one has run out; it returns the
 * count including this bump, so concurrent callers on any node each see a distinct count.
 */
export interface CounterKey {
  /** The account id, or SERVER_SCOPE. */
  scope: string
  key: string
}

/** The scope of windows that belong to no account ('' is never an account id). */
export const SERVER_SCOPE = ''

export async function bumpWindow(
  db: Executor,
  counter: CounterKey,
  now: Date,
  windowMs: number,
): Promise<number> {
  return (await bumpWindowAt(db, counter, now, windowMs)).count
}

/** `bumpWindow`, also telling when the current window ends (for `Retry-After`). */
export async function bumpWindowAt(
  db: Executor,
  { scope, key }: CounterKey,
  now: Date,
  windowMs: number,
): Promise<{ count: number; windowEndsAt: Date }> {
  const at = now.toISOString()
  const cutoff = new Date(now.getTime() - windowMs).toISOString()
  const row = await db
    .insertInto('login_throttle')
    .values({ account_id: scope, key, window_started_at: at, failures: 1 })
    .onConflict((oc) =>
      oc.columns(['account_id', 'key']).doUpdateSet({
        failures: sql`case when login_throttle.window_started_at <= ${cutoff} then 1 else login_throttle.failures + 1 end`,
        window_started_at: sql`case when login_throttle.window_started_at <= ${cutoff} then ${at} else login_throttle.window_started_at end`,
      }),
    )
    .returning(['failures', 'window_started_at'])
    .executeTakeFirstOrThrow()
  const endsAt = new Date(new Date(row.window_started_at).getTime() + windowMs)
  return { count: Number(row.failures), windowEndsAt: endsAt }
}

/**
 * Takes back one count of the key's current window (never below zero): a counted action that
 * did not happen after all (a reset email the provider refused) must not use up the window.
 */
export async function releaseWindow(db: Executor, { scope, key }: CounterKey): Promise<void> {
  await db
    .updateTable('login_throttle')
    .set({ failures: sql`failures - 1` })
    .where('account_id', '=', scope)
    .where('key', '=', key)
    .where('failures', '>', 0)
    .execute()
}

export interface AttemptCount {
  /** Attempts in the window, this one and those still in flight included. */
  count: number
  /** Of those, attempts not yet settled (this one included). */
  inFlight: number
  windowEndsAt: Date
}

/** A counter and the length of its window. */
export interface CounterWindow extends CounterKey {
  windowMs: number
}

// Keys are digests of distinct texts (each names what it counts): a key alone tells windows apart.
const windowCase = (windows: readonly CounterWindow[], now: Date) =>
  sql`case ${sql.join(
    windows.map(
      (w) =>
        sql`when excluded.key = ${w.key} then ${new Date(now.getTime() - w.windowMs).toISOString()}`,
    ),
    sql` `,
  )} end`

/**
 * `bumpWindowsAt` for attempts whose outcome is not known yet: each is also counted in flight
 * until `settleAttempts`. A new window starts both counts afresh (an attempt that never settled,
 * its process having died, stops weighing at the latest when its window ends).
 */
export async function bumpAttemptsAt(
  db: Executor,
  windows: readonly CounterWindow[],
  now: Date,
): Promise<AttemptCount[]> {
  const at = now.toISOString()
  const cutoff = windowCase(windows, now)
  const expired = sql`login_throttle.window_started_at <= ${cutoff}`
  // Rows are locked in (scope, key) order by every statement here, so concurrent ones cannot
  // deadlock.
  const sorted = [...windows].sort(byScopeAndKey)
  const rows = await db
    .insertInto('login_throttle')
    .values(
      sorted.map((w) => ({
        account_id: w.scope,
        key: w.key,
        window_started_at: at,
        failures: 1,
        in_flight: 1,
      })),
    )
    .onConflict((oc) =>
      oc.columns(['account_id', 'key']).doUpdateSet({
        failures: sql`case when ${expired} then 1 else login_throttle.failures + 1 end`,
        in_flight: sql`case when ${expired} then 1 else login_throttle.in_flight + 1 end`,
        window_started_at: sql`case when ${expired} then ${at} else login_throttle.window_started_at end`,
      }),
    )
    .returning(['key', 'failures', 'in_flight', 'window_started_at'])
    .execute()
  const byKey = new Map(rows.map((r) => [r.key, r]))
  return windows.map((w) => {
    const row = byKey.get(w.key)
    if (!row) throw new Error('window counter: an upserted row was not returned')
    const endsAt = new Date(new Date(row.window_started_at).getTime() + w.windowMs)
    return { count: Number(row.failures), inFlight: Number(row.in_flight), windowEndsAt: endsAt }
  })
}

/** The current counts, read only (a waiting attempt looks before it counts itself again). */
export async function peekAttempts(
  db: Executor,
  windows: readonly CounterWindow[],
  now: Date,
): Promise<{ count: number; inFlight: number }[]> {
  const rows = await db
    .selectFrom('login_throttle')
    .select(['key', 'failures', 'in_flight', 'window_started_at'])
    .where((eb) => eb(eb.refTuple('account_id', 'key'), 'in', tuples(eb, windows)))
    .execute()
  const byKey = new Map(rows.map((r) => [r.key, r]))
  return windows.map((w) => {
    const row = byKey.get(w.key)
    const live = row && new Date(row.window_started_at).getTime() + w.windowMs > now.getTime()
    return live
      ? { count: Number(row.failures), inFlight: Number(row.in_flight) }
      : { count: 0, inFlight: 0 }
  })
}

/**
 * Settles one attempt in each key: no longer in flight; with `uncount` also no longer counted
 * (it succeeded, or it never ran); `forgive`: this key's settled failures are forgotten too (a
 * success resets its client's counter; attempts still in flight stay counted). Never below
 * zero: a window that started afresh meanwhile has already forgotten the attempt. One
 * statement; on PostgreSQL its rows are locked in key order, as `bumpAttemptsAt` locks them.
 */
export async function settleAttempts(
  db: Executor,
  counters: readonly CounterKey[],
  uncount: boolean,
  forgive?: string,
): Promise<void> {
  const less = (column: 'failures' | 'in_flight') =>
    sql<number>`case when ${sql.ref(column)} > 0 then ${sql.ref(column)} - 1 else 0 end`
  const failures = forgive
    ? sql<number>`case when key = ${forgive} then (case when in_flight > 1 then in_flight - 1 else 0 end) else ${uncount ? less('failures') : sql.ref('failures')} end`
    : uncount
      ? less('failures')
      : undefined
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter
  await db
    .updateTable('login_throttle')
    .set({ in_flight: less('in_flight'), ...(failures ? { failures } : {}) })
    .where((eb) =>
      postgres
        ? eb(
            eb.refTuple('account_id', 'key'),
            'in',
            eb
              .selectFrom('login_throttle')
              .select(['account_id', 'key'])
              .where(eb.refTuple('account_id', 'key'), 'in', tuples(eb, counters))
              .orderBy('account_id')
              .orderBy('key')
              .forUpdate()
              .$asTuple('account_id', 'key'),
          )
        : eb(eb.refTuple('account_id', 'key'), 'in', tuples(eb, counters)),
    )
    .execute()
}

const byScopeAndKey = (x: CounterKey, y: CounterKey) =>
  x.scope === y.scope ? (x.key < y.key ? -1 : 1) : x.scope < y.scope ? -1 : 1

const tuples = (
  eb: ExpressionBuilder<Database, 'login_throttle'>,
  counters: readonly CounterKey[],
) => counters.map((c) => eb.tuple(c.scope, c.key))
