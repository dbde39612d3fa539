import type { Executor } from '../../store/executor.js'
import type { PasswordResetFlowsTable } from '../../store/schema.js'

export type FlowRow = PasswordResetFlowsTable

export async function insert(db: Executor, row: FlowRow): Promise<void> {
  await db.insertInto('password_reset_flows').values(row).execute()
}

export function find(db: Executor, accountId: string, id: string) {
  return db
    .selectFrom('password_reset_flows')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
}

export function list(db: Executor, accountId: string) {
  return db
    .selectFrom('password_reset_flows')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute()
}

export async function remove(db: Executor, accountId: string, id: string): Promise<boolean> {
  const result = await db
    .deleteFrom('password_reset_flows')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

export async function linkSat(
  db: Executor,
  accountId: string,
  id: string,
  satId: string,
): Promise<boolean> {
  const result = await db
    .updateTable('password_reset_flows')
    .set({ linked_sat_id: satId })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) > 0
}

/** The account's flows by id after `after` whose SendGrid key is not under data key `keyId`. */
export function listKeysNotUnder(
  db: Executor,
  accountId: string,
  keyId: string,
  after: string | undefined,
  limit: number,
) {
  let query = db
    .selectFrom('password_reset_flows')
    .select(['id', 'sg_api_key'])
    .where('account_id', '=', accountId)
    .where('sg_api_key', 'not like', `c1.${keyId}.%`)
  if (after !== undefined) query = query.where('id', '>', after)
  return query.orderBy('id').limit(limit).execute()
}

/** Swaps a flow's sealed SendGrid key, only if nobody changed it meanwhile. */
export async function replaceSealedKey(
  db: Executor,
  accountId: string,
  id: string,
  before: string,
  after: string,
): Promise<boolean> {
  const result = await db
    .updateTable('password_reset_flows')
    .set({ sg_api_key: after })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .where('sg_api_key', '=', before)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}
