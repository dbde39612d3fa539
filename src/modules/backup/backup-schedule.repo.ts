import type { Executor } from '../../store/executor.js'
import type { BackupScheduleTable } from '../../store/schema.js'

/** The one schedule there is (COFFER_BACKUP_SCHEDULE): its row's id. */
export const SCHEDULE_ID = 'scheduled'

/**
 * Claims `slot` for `holder`: only if no node claimed it (or a later one) and no node holds an
 * unexpired lease. Exactly one of the nodes that try the same slot gets true.
 */
export async function claimSlot(
  db: Executor,
  claim: { slot: string; holder: string; now: string; leaseUntil: string },
): Promise<boolean> {
  await db
    .insertInto('backup_schedule')
    .values({ id: SCHEDULE_ID, slot: '' })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute()
  const result = await db
    .updateTable('backup_schedule')
    .set({ slot: claim.slot, holder: claim.holder, lease_until: claim.leaseUntil })
    .where('id', '=', SCHEDULE_ID)
    .where('slot', '<', claim.slot)
    .where((eb) => eb.or([eb('holder', 'is', null), eb('lease_until', '<', claim.now)]))
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/**
 * Extends the holder's lease while it still holds it: false when another node has taken over or
 * the lease lapsed (`now` past it) — the holder must then stop writing (decisions 245).
 */
export async function renewLease(
  db: Executor,
  holder: string,
  renewal: { now: string; leaseUntil: string },
): Promise<boolean> {
  const result = await db
    .updateTable('backup_schedule')
    .set({ lease_until: renewal.leaseUntil })
    .where('id', '=', SCHEDULE_ID)
    .where('holder', '=', holder)
    .where('lease_until', '>=', renewal.now)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/** The holder's run ended well: the lease is released with the outcome. */
export async function recordSuccess(
  db: Executor,
  holder: string,
  outcome: { at: string; size: number; target: string },
): Promise<void> {
  await db
    .updateTable('backup_schedule')
    .set({
      holder: null,
      lease_until: null,
      last_success_at: outcome.at,
      last_size: outcome.size,
      last_target: outcome.target,
    })
    .where('id', '=', SCHEDULE_ID)
    .where('holder', '=', holder)
    .execute()
}

/** The holder's run failed: the lease is released, the failure counted. */
export async function recordFailure(
  db: Executor,
  holder: string,
  outcome: { at: string; error: string },
): Promise<void> {
  await db
    .updateTable('backup_schedule')
    .set((eb) => ({
      holder: null,
      lease_until: null,
      last_failure_at: outcome.at,
      last_error: outcome.error.slice(0, 1000),
      failures: eb('failures', '+', 1),
    }))
    .where('id', '=', SCHEDULE_ID)
    .where('holder', '=', holder)
    .execute()
}

export function scheduleState(db: Executor): Promise<BackupScheduleTable | undefined> {
  return db
    .selectFrom('backup_schedule')
    .selectAll()
    .where('id', '=', SCHEDULE_ID)
    .executeTakeFirst() as Promise<BackupScheduleTable | undefined>
}
