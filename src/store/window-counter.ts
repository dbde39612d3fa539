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
    .returning('failures')
    .executeTakeFirstOrThrow()
  return Number(row.failures)
}
