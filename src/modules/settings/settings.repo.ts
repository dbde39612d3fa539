import { PostgresAdapter } from 'kysely'
import type { Executor } from '../../store/executor.js'
import type { AccountSettingsTable } from '../../store/schema.js'

export type SettingsRow = AccountSettingsTable

/** What a change writes: the given columns only (a partial update). */
export type SettingsPatch = Partial<Omit<SettingsRow, 'account_id' | 'updated_at'>>

/** The account's row, or undefined while it has never changed a setting (every default). */
export async function find(db: Executor, accountId: string): Promise<SettingsRow | undefined> {
  return db
    .selectFrom('account_settings')
    .selectAll()
    .where('account_id', '=', accountId)
    .executeTakeFirst()
}

/**
 * The row as `find` gives it, locked until the transaction ends (PostgreSQL; SQLite has one
 * writer), so concurrent changes of one account's settings queue and each sees the one before.
 */
export async function findForUpdate(
  db: Executor,
  accountId: string,
): Promise<SettingsRow | undefined> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return find(db, accountId)
  return db
    .selectFrom('account_settings')
    .selectAll()
    .where('account_id', '=', accountId)
    .forUpdate()
    .executeTakeFirst()
}

/** Writes the given columns, creating the row (defaults for the rest) when there is none. */
export async function upsert(
  db: Executor,
  accountId: string,
  defaults: Omit<SettingsRow, 'account_id' | 'updated_at'>,
  patch: SettingsPatch,
  updatedAt: string,
): Promise<SettingsRow> {
  return db
    .insertInto('account_settings')
    .values({ ...defaults, ...patch, account_id: accountId, updated_at: updatedAt })
    .onConflict((oc) => oc.column('account_id').doUpdateSet({ ...patch, updated_at: updatedAt }))
    .returningAll()
    .executeTakeFirstOrThrow()
}
