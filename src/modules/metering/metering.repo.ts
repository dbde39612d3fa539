import { sql } from 'kysely'
import type { Executor } from '../../store/executor.js'

/** One increment: `n` operations of `category` on `day` (UTC `YYYY-MM-DD`) for the account. */
export interface Increment {
  accountId: string
  day: string
  category: string
  n: number
}

/**
 * Adds every increment in one statement (insert … on conflict do update set n = n + excluded.n),
 * atomic on both databases, so nodes adding to the same row at once never lose a count. The
 * caller merges increments of one key (PostgreSQL refuses to update a row twice in a statement)
 * and sorts them, so two nodes lock shared rows in the same order (no deadlock).
 */
export async function addAll(db: Executor, increments: readonly Increment[]): Promise<void> {
  if (increments.length === 0) return
  await db
    .insertInto('operation_counts')
    .values(
      increments.map((i) => ({
        account_id: i.accountId,
        day: i.day,
        category: i.category,
        n: i.n,
      })),
    )
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'day', 'category'])
        .doUpdateSet({ n: sql`operation_counts.n + excluded.n` }),
    )
    .execute()
}

/** The account's counts of the days from `from` to `to` (inclusive), by day then category. */
export async function between(db: Executor, accountId: string, from: string, to: string) {
  const rows = await db
    .selectFrom('operation_counts')
    .select(['day', 'category', 'n'])
    .where('account_id', '=', accountId)
    .where('day', '>=', from)
    .where('day', '<=', to)
    .orderBy('day')
    .orderBy('category')
    .execute()
  return rows.map((r) => ({ day: r.day, category: r.category, n: Number(r.n) }))
}

/** Everything the account consumed on `day`, all categories together. */
export async function dayTotal(db: Executor, accountId: string, day: string): Promise<number> {
  const row = await db
    .selectFrom('operation_counts')
    .select((eb) => eb.fn.sum<number | string | null>('n').as('total'))
    .where('account_id', '=', accountId)
    .where('day', '=', day)
    .executeTakeFirst()
  return Number(row?.total ?? 0)
}
