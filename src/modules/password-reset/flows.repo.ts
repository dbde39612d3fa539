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
