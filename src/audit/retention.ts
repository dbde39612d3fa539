import { type Kysely, sql } from 'kysely'
import type { Database } from '../store/schema.js'
import { outsideAudit } from './context.js'
import { verifyChains } from './verify.js'

/** How often the serving process looks for whole segments past retention. */
export const AUDIT_PRUNE_INTERVAL_MS = 3_600_000
const DAY_MS = 86_400_000

export interface PruneResult {
  /** Events deleted, per account. */
  pruned: Record<string, number>
  /** Accounts whose chain did not verify: nothing of them was deleted. */
  refused: string[]
}

/**
 * Retention (COFFER_AUDIT_RETENTION_DAYS): a segment is one UTC day of one account's chain. The
 * days that ended more than `retentionDays` ago are deleted, whole, and only from a chain that
 * verifies first; the hash of the last deleted event becomes the chain's anchor, so verify
 * still checks what remains. Events are deleted up to the last one stamped before the cut-off
 * day (an event's time and place in its chain agree to within a group-commit batch).
 */
export async function pruneAudit(
  db: Kysely<Database>,
  dialect: 'sqlite' | 'postgres',
  now: Date,
  retentionDays: number,
): Promise<PruneResult> {
  return outsideAudit(async () => {
    const dayStart = Math.floor(now.getTime() / DAY_MS) * DAY_MS
    const cutoff = new Date(dayStart - retentionDays * DAY_MS).toISOString()
    const result: PruneResult = { pruned: {}, refused: [] }
    const heads = await db.selectFrom('audit_chain_heads').select('account_id').execute()
    for (const { account_id: accountId } of heads) {
      const last = await db
        .selectFrom('audit_events')
        .select(['seq', 'hash'])
        .where('account_id', '=', accountId)
        .where('at', '<', cutoff)
        .orderBy('seq', 'desc')
        .limit(1)
        .executeTakeFirst()
      if (!last) continue
      const report = await verifyChains(db, accountId)
      if (report.problems.length > 0) {
        result.refused.push(accountId)
        continue
      }
      const upTo = Number(last.seq)
      const deleted = await db.transaction().execute(async (trx) => {
        if (dialect === 'postgres') await sql`set local coffer.audit_prune = 'on'`.execute(trx)
        await trx
          .updateTable('audit_chain_heads')
          .set({ anchor_seq: upTo, anchor_hash: last.hash })
          .where('account_id', '=', accountId)
          .where('anchor_seq', '<', upTo)
          .execute()
        const r = await trx
          .deleteFrom('audit_events')
          .where('account_id', '=', accountId)
          .where('seq', '<=', upTo)
          .executeTakeFirst()
        return Number(r.numDeletedRows)
      })
      if (deleted > 0) result.pruned[accountId] = deleted
    }
    return result
  })
}

/** Runs `pruneAudit` every AUDIT_PRUNE_INTERVAL_MS (unref'd timers, one pass at a time). */
export function scheduleAuditPruning(
  prune: () => Promise<PruneResult>,
  report: { done(result: PruneResult): void; failed(error: unknown): void },
  everyMs = AUDIT_PRUNE_INTERVAL_MS,
): { stop(): Promise<void> } {
  let running: Promise<void> | undefined
  const pass = () => {
    if (running !== undefined) return
    running = prune()
      .then(report.done, report.failed)
      .finally(() => {
        running = undefined
      })
  }
  const first = setTimeout(pass, Math.min(everyMs, 60_000))
  const every = setInterval(pass, everyMs)
  first.unref()
  every.unref()
  return {
    stop: async () => {
      clearTimeout(first)
      clearInterval(every)
      await running
    },
  }
}
