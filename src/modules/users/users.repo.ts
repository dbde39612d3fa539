import type { Selectable, Updateable } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import { precompiled, precompiledList } from '../../store/precompiled.js'
import type { UsersTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'

export type UserRow = Selectable<UsersTable>
export type UserPatch = Updateable<UsersTable>

export async function insert(db: Executor, row: UserRow): Promise<void> {
  await db.insertInto('users').values(row).execute()
}

const findByIdQuery = precompiled((db: Executor, accountId: string, id: string) =>
  db.selectFrom('users').selectAll().where('account_id', '=', accountId).where('id', '=', id),
)

export async function findById(db: Executor, accountId: string, id: string) {
  const [row] = await findByIdQuery(db, accountId, id)
  return row
}

/** The most ids one read names (users.routes.ts MAX_IDS). */
const MAX_IDS = 100

const findByIdsQuery = precompiledList(
  MAX_IDS,
  (db: Executor, [accountId]: [string], ids: string[]) =>
    db.selectFrom('users').selectAll().where('account_id', '=', accountId).where('id', 'in', ids),
)

export function findByIds(db: Executor, accountId: string, ids: readonly string[]) {
  if (ids.length === 0) return Promise.resolve([])
  return findByIdsQuery(db, [accountId], ids)
}

/** The one ACTIVATED user with this name, the only kind that may log in. */
export function findActivatedByUsername(db: Executor, accountId: string, username: string) {
  return db
    .selectFrom('users')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('username', '=', username)
    .where('status', '=', 'ACTIVATED')
    .executeTakeFirst()
}

export function list(
  db: Executor,
  accountId: string,
  statuses: readonly string[],
  scopes: readonly ItemScope[],
) {
  return db
    .selectFrom('users')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('status', 'in', statuses)
    .where((eb) => scopePredicate(eb, scopes, 'id'))
    .orderBy('id')
    .execute()
}

/**
 * Updates the user; with `onlyIfStatus`, only while its status is one of those (a compare-and-set
 * that holds on PostgreSQL's READ COMMITTED too). Returns the number of rows changed (0 or 1).
 */
export async function update(
  db: Executor,
  accountId: string,
  id: string,
  patch: UserPatch,
  onlyIfStatus?: readonly string[],
): Promise<number> {
  let q = db
    .updateTable('users')
    .set(patch)
    .where('account_id', '=', accountId)
    .where('id', '=', id)
  if (onlyIfStatus) q = q.where('status', 'in', onlyIfStatus)
  const result = await q.executeTakeFirst()
  return Number(result.numUpdatedRows)
}

/** Rows whose attributes are still plaintext JSON (written before encryption at rest). */
export function listPlaintextAttributes(db: Executor) {
  return db
    .selectFrom('users')
    .select(['account_id', 'id', 'attributes'])
    .where('attributes', 'not like', 'c1.%')
    .execute()
}

/** Swaps a plaintext value for its ciphertext, only if nobody changed it meanwhile. */
export async function replaceAttributes(
  db: Executor,
  accountId: string,
  id: string,
  plain: string,
  sealed: string,
) {
  await db
    .updateTable('users')
    .set({ attributes: sealed })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .where('attributes', '=', plain)
    .execute()
}

/** Every user of the account by id after `after` (re-indexing in pages). */
export function pageAll(db: Executor, accountId: string, after: string, limit: number) {
  return db
    .selectFrom('users')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '>', after)
    .orderBy('id')
    .limit(limit)
    .execute()
}

/** id, username and status of every user of the account, by id (the policy simulator). */
export function summaries(db: Executor, accountId: string) {
  return db
    .selectFrom('users')
    .select(['id', 'username', 'status'])
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
}

export async function countOfAccount(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('users')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/** True when the account has any user at all. */
export async function anyUser(db: Executor, accountId: string): Promise<boolean> {
  const row = await db
    .selectFrom('users')
    .select('id')
    .where('account_id', '=', accountId)
    .limit(1)
    .executeTakeFirst()
  return row !== undefined
}

/** Re-encryption: the account's users by id after `after` whose attributes are not under `keyId`. */
export function listAttributesNotUnderKey(
  db: Executor,
  accountId: string,
  keyId: string,
  after: string | undefined,
  limit: number,
) {
  let query = db
    .selectFrom('users')
    .select(['id', 'attributes'])
    .where('account_id', '=', accountId)
    .where('attributes', 'not like', `c1.${keyId}.%`)
  if (after !== undefined) query = query.where('id', '>', after)
  return query.orderBy('id').limit(limit).execute()
}

/** Swaps a user's attribute ciphertext, only if nobody changed it meanwhile. */
export async function replaceSealedAttributes(
  db: Executor,
  accountId: string,
  id: string,
  before: string,
  after: string,
): Promise<boolean> {
  const result = await db
    .updateTable('users')
    .set({ attributes: after })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .where('attributes', '=', before)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}
