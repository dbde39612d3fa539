import type { Executor } from '../../store/executor.js'

/** The one key of the `bootstrap` singleton row (migration 0010). */
const FIRST_ACCOUNT = 'first-account'

export async function insertAccount(db: Executor, id: string, createdAt: string): Promise<void> {
  await db.insertInto('accounts').values({ id, created_at: createdAt }).execute()
}

/**
 * Claims the singleton row for this account; false when another transaction holds it. On
 * PostgreSQL a concurrent claim waits for the holder's commit (then loses) or rollback (then
 * wins); on SQLite the writing transaction holds the database's one write lock.
 */
export async function claimFirstAccount(
  db: Executor,
  accountId: string,
  createdAt: string,
): Promise<boolean> {
  const row = await db
    .insertInto('bootstrap')
    .values({ id: FIRST_ACCOUNT, account_id: accountId, created_at: createdAt })
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('account_id')
    .executeTakeFirst()
  return row !== undefined
}

export async function firstAccount(db: Executor): Promise<string | undefined> {
  const row = await db
    .selectFrom('bootstrap')
    .select('account_id')
    .where('id', '=', FIRST_ACCOUNT)
    .executeTakeFirst()
  return row?.account_id
}
