import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import type { Store } from '../../src/store/db.js'

/** Until `done` holds; throws (never passes) when it does not within 10 s. */
export async function until(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(5)
  }
}

/**
 * PostgreSQL: every change notification committed through `from` so far has reached `to`
 * (store/rights-feed.ts): a probe is sent after them and, delivered in commit order, arrives
 * last. Waited for by its arrival, never by time. SQLite: nothing to wait for.
 */
export async function notificationsDelivered(from: Store, to: Store): Promise<void> {
  const channel = from.rights.channel
  if (channel === undefined) return
  await until('node listening', () => to.rights.trusted)
  const probe = `probe-${randomUUID()}`
  await sql`select pg_notify(${channel}, ${probe})`.execute(from.db)
  await until('the notifications', () => to.rights.lastProbe === probe)
}
