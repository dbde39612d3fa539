import { type Selectable, sql } from 'kysely'
import type { Executor } from '../../store/executor.js'
import type { UserMfaTable } from '../../store/schema.js'

export type UserMfaRow = Selectable<UserMfaTable>

/**
 * `user_mfa`: one row per user that started enrollment. Every state change is one conditional
 * statement on the row that reports whether it applied (a compare-and-set on the ciphertext the
 * caller verified against), so concurrent requests on any number of nodes cannot both win.
 */

export function find(db: Executor, accountId: string, userId: string) {
  return db
    .selectFrom('user_mfa')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .executeTakeFirst()
}

/** Sets (or replaces) the pending secret, only while no secret is active. True when it did. */
export async function savePending(
  db: Executor,
  accountId: string,
  userId: string,
  pendingSecret: string,
  now: string,
): Promise<boolean> {
  const row = await db
    .insertInto('user_mfa')
    .values({
      account_id: accountId,
      user_id: userId,
      pending_secret: pendingSecret,
      secret: null,
      last_used_step: -1,
      failures: 0,
      failures_window_started_at: null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'user_id'])
        .doUpdateSet((eb) => ({
          pending_secret: eb.ref('excluded.pending_secret'),
          updated_at: eb.ref('excluded.updated_at'),
        }))
        .where('user_mfa.secret', 'is', null),
    )
    .returning('user_id')
    .executeTakeFirst()
  return row !== undefined
}

/**
 * Makes the pending secret the active one, if it is still the one verified and nothing is
 * active; both finalize steps count as used.
 */
export async function activate(
  db: Executor,
  accountId: string,
  userId: string,
  pendingSecret: string,
  lastUsedStep: number,
  now: string,
): Promise<boolean> {
  const result = await db
    .updateTable('user_mfa')
    .set((eb) => ({
      secret: eb.ref('pending_secret'),
      pending_secret: null,
      last_used_step: lastUsedStep,
      failures: 0,
      failures_window_started_at: null,
      updated_at: now,
    }))
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('pending_secret', '=', pendingSecret)
    .where('secret', 'is', null)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/**
 * Accepts the code of `step` once: moves the high-water mark to it only if it is still below
 * (and the secret is still the one verified). True for exactly one caller per step.
 */
export async function consumeStep(
  db: Executor,
  accountId: string,
  userId: string,
  secret: string,
  step: number,
): Promise<boolean> {
  const result = await db
    .updateTable('user_mfa')
    .set({ last_used_step: step })
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('secret', '=', secret)
    .where('last_used_step', '<', step)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/** Unenrolls with the code of `step`: the row goes, if the code is still unused. */
export async function removeWithStep(
  db: Executor,
  accountId: string,
  userId: string,
  secret: string,
  step: number,
): Promise<boolean> {
  const result = await db
    .deleteFrom('user_mfa')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('secret', '=', secret)
    .where('last_used_step', '<', step)
    .executeTakeFirst()
  return Number(result.numDeletedRows) === 1
}

/** Forgets everything about the user's MFA (deactivation, operator reset). */
export async function remove(db: Executor, accountId: string, userId: string): Promise<void> {
  await db
    .deleteFrom('user_mfa')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .execute()
}

/**
 * Counts one code attempt in the user's failure window (a new window starts when the old one has
 * run out) and returns the count, or undefined when the user has no active secret. One atomic
 * statement, so parallel attempts are all counted before any of them is checked.
 */
export async function countAttempt(
  db: Executor,
  accountId: string,
  userId: string,
  now: Date,
  windowMs: number,
): Promise<number | undefined> {
  const at = now.toISOString()
  const cutoff = new Date(now.getTime() - windowMs).toISOString()
  const expired = sql<boolean>`(failures_window_started_at is null or failures_window_started_at <= ${cutoff})`
  const row = await db
    .updateTable('user_mfa')
    .set({
      failures: sql`case when ${expired} then 1 else failures + 1 end`,
      failures_window_started_at: sql`case when ${expired} then ${at} else failures_window_started_at end`,
    })
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('secret', 'is not', null)
    .returning('failures')
    .executeTakeFirst()
  return row === undefined ? undefined : Number(row.failures)
}

/** A successful attempt is not a failure: takes back the count `countAttempt` added. */
export async function uncountAttempt(db: Executor, accountId: string, userId: string) {
  await db
    .updateTable('user_mfa')
    .set({ failures: sql`failures - 1` })
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where('failures', '>', 0)
    .execute()
}

/** The two sealed columns of `user_mfa` (`coffer keys reencrypt` walks each). */
export type MfaSealedColumn = 'secret' | 'pending_secret'

/** The account's rows by user id after `after` whose `column` is not under data key `keyId`. */
export async function listSealedNotUnderKey(
  db: Executor,
  column: MfaSealedColumn,
  accountId: string,
  keyId: string,
  after: string | undefined,
  limit: number,
): Promise<{ user_id: string; sealed: string }[]> {
  let query = db
    .selectFrom('user_mfa')
    .select(['user_id', `${column} as sealed`])
    .where('account_id', '=', accountId)
    .where(column, 'is not', null)
    .where(column, 'not like', `c1.${keyId}.%`)
  if (after !== undefined) query = query.where('user_id', '>', after)
  const rows = await query.orderBy('user_id').limit(limit).execute()
  return rows.map((r) => ({ user_id: r.user_id, sealed: String(r.sealed) }))
}

/** Swaps the ciphertext in `column`, only if it is still `before` (a state change wins). */
export async function replaceSealed(
  db: Executor,
  column: MfaSealedColumn,
  accountId: string,
  userId: string,
  before: string,
  after: string,
): Promise<boolean> {
  const result = await db
    .updateTable('user_mfa')
    .set({ [column]: after })
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .where(column, '=', before)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}
