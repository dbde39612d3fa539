import { sql } from 'kysely'
import type { Executor } from './executor.js'

/**
 * Fixed-window counters shared by every node through the database (table `login_throttle`,
 * which holds login failures and message counts alike under distinct keys).
 *
 * `bump` is one atomic upsert: a new window starts when the old one has run out; it returns the
 * count including this bump, so concurrent callers on any node each see a distinct count.
 */
export async function bumpWindow(
  db: Executor,
  key: string,
  now: Date,
  windowMs: number,
): Promise<number> {
  return (await bumpWindowAt(db, key, now, windowMs)).count
}

/** `bumpWindow`, also telling when the current window ends (for `Retry-After`). */
export async function bumpWindowAt(
  db: Executor,
  key: string,
  now: Date,
  windowMs: number,
): Promise<{ count: number; windowEndsAt: Date }> {
  const at = now.toISOString()
  const cutoff = new Date(now.getTime() - windowMs).toISOString()
  const row = await db
    .insertInto('login_throttle')
    .values({ key, window_started_at: at, failures: 1 })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
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
 * Several `bumpWindowAt`s in one statement: one round trip and one commit, and row locks held
 * only for that statement (a login counts in four windows, one of them a row every login of the
 * server shares). Keys must be distinct; rows are locked in the order given, so callers that
 * always give their kinds of key in the same order cannot deadlock each other.
 */
export async function bumpWindowsAt(
  db: Executor,
  windows: readonly { key: string; windowMs: number }[],
  now: Date,
): Promise<{ count: number; windowEndsAt: Date }[]> {
  const at = now.toISOString()
  const cutoffOf = (windowMs: number) => new Date(now.getTime() - windowMs).toISOString()
  // Each key's own window: the cutoff is chosen by the conflicting row's key.
  const cutoff = sql`case ${sql.join(
    windows.map((w) => sql`when excluded.key = ${w.key} then ${cutoffOf(w.windowMs)}`),
    sql` `,
  )} end`
  const rows = await db
    .insertInto('login_throttle')
    .values(windows.map((w) => ({ key: w.key, window_started_at: at, failures: 1 })))
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        failures: sql`case when login_throttle.window_started_at <= ${cutoff} then 1 else login_throttle.failures + 1 end`,
        window_started_at: sql`case when login_throttle.window_started_at <= ${cutoff} then ${at} else login_throttle.window_started_at end`,
      }),
    )
    .returning(['key', 'failures', 'window_started_at'])
    .execute()
  const byKey = new Map(rows.map((r) => [r.key, r]))
  return windows.map((w) => {
    const row = byKey.get(w.key)
    if (!row) throw new Error('window counter: an upserted row was not returned')
    const endsAt = new Date(new Date(row.window_started_at).getTime() + w.windowMs)
    return { count: Number(row.failures), windowEndsAt: endsAt }
  })
}

/**
 * Takes back one count of the key's current window (never below zero): a counted action that
 * did not happen after all (a reset email the provider refused) must not use up the window.
 */
export async function releaseWindow(db: Executor, key: string): Promise<void> {
  await db
    .updateTable('login_throttle')
    .set({ failures: sql`failures - 1` })
    .where('key', '=', key)
    .where('failures', '>', 0)
    .execute()
}
