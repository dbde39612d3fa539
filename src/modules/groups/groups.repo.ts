import type { Selectable } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import { precompiled } from '../../store/precompiled.js'
import type { GroupsTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'

export type GroupRow = Selectable<GroupsTable>

export async function insert(db: Executor, row: GroupRow): Promise<void> {
  await db.insertInto('groups').values(row).execute()
}

export function findById(db: Executor, accountId: string, id: string) {
  return db
    .selectFrom('groups')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
}

export function list(db: Executor, accountId: string, scopes: readonly ItemScope[]) {
  return db
    .selectFrom('groups')
    .selectAll()
    .where('account_id', '=', accountId)
    .where((eb) => scopePredicate(eb, scopes, 'id'))
    .orderBy('id')
    .execute()
}

export async function update(
  db: Executor,
  accountId: string,
  id: string,
  patch: Partial<Pick<GroupRow, 'name' | 'policy' | 'updated_at'>>,
): Promise<void> {
  await db
    .updateTable('groups')
    .set(patch)
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .execute()
}

/**
 * Deletes the group; its memberships go with it (`on delete cascade`). The group row is locked
 * first, as every membership write does (through its foreign key): deleting the memberships
 * before the group deadlocked against a concurrent APPEND on PostgreSQL.
 */
export async function remove(db: Executor, accountId: string, id: string): Promise<void> {
  await db.deleteFrom('groups').where('account_id', '=', accountId).where('id', '=', id).execute()
}

export async function memberIds(
  db: Executor,
  accountId: string,
  groupId: string,
): Promise<string[]> {
  const rows = await db
    .selectFrom('group_members')
    .select('user_id')
    .where('account_id', '=', accountId)
    .where('group_id', '=', groupId)
    .orderBy('user_id')
    .execute()
  return rows.map((r) => r.user_id)
}

/** Adds memberships; existing ones are left as they are (concurrent APPENDs all land). */
export async function addMembers(
  db: Executor,
  accountId: string,
  groupId: string,
  userIds: readonly string[],
) {
  if (userIds.length === 0) return
  await db
    .insertInto('group_members')
    .values(userIds.map((user_id) => ({ account_id: accountId, group_id: groupId, user_id })))
    .onConflict((oc) => oc.columns(['account_id', 'group_id', 'user_id']).doNothing())
    .execute()
}

export async function removeMembers(
  db: Executor,
  accountId: string,
  groupId: string,
  userIds: readonly string[],
) {
  if (userIds.length === 0) return 0
  const result = await db
    .deleteFrom('group_members')
    .where('account_id', '=', accountId)
    .where('group_id', '=', groupId)
    .where('user_id', 'in', userIds)
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

export async function removeUserFromAll(
  db: Executor,
  accountId: string,
  userId: string,
): Promise<void> {
  await db
    .deleteFrom('group_members')
    .where('account_id', '=', accountId)
    .where('user_id', '=', userId)
    .execute()
}

export function membershipsOf(db: Executor, accountId: string, userIds: readonly string[]) {
  if (userIds.length === 0) return Promise.resolve([])
  return db
    .selectFrom('group_members')
    .select(['user_id', 'group_id'])
    .where('account_id', '=', accountId)
    .where('user_id', 'in', userIds)
    .orderBy('group_id')
    .execute()
}

const policiesOfUserQuery = precompiled((db: Executor, accountId: string, userId: string) =>
  db
    .selectFrom('group_members as m')
    .innerJoin('groups as g', (j) =>
      j.onRef('g.account_id', '=', 'm.account_id').onRef('g.id', '=', 'm.group_id'),
    )
    .select('g.policy')
    .where('m.account_id', '=', accountId)
    .where('m.user_id', '=', userId),
)

/** Policies (JSON text) of every group the user belongs to (hot path: every policy check). */
export async function policiesOfUser(
  db: Executor,
  accountId: string,
  userId: string,
): Promise<string[]> {
  const rows = await policiesOfUserQuery(db, accountId, userId)
  return rows.map((r) => r.policy)
}

/** Every group of the account with its policy (the policy simulator), by id. */
export function allOfAccount(db: Executor, accountId: string) {
  return db
    .selectFrom('groups')
    .select(['id', 'name', 'policy'])
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
}

/** Every membership of the account (the policy simulator's access query). */
export function allMemberships(db: Executor, accountId: string) {
  return db
    .selectFrom('group_members')
    .select(['user_id', 'group_id'])
    .where('account_id', '=', accountId)
    .execute()
}

/** The groups (id, name, policy) the user belongs to, by id. */
export function groupsOfUser(db: Executor, accountId: string, userId: string) {
  return db
    .selectFrom('group_members as m')
    .innerJoin('groups as g', (j) =>
      j.onRef('g.account_id', '=', 'm.account_id').onRef('g.id', '=', 'm.group_id'),
    )
    .select(['g.id', 'g.name', 'g.policy'])
    .where('m.account_id', '=', accountId)
    .where('m.user_id', '=', userId)
    .orderBy('g.id')
    .execute()
}

/** How many groups the account has. */
export async function countOfAccount(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('groups')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

export async function existingGroupIds(db: Executor, accountId: string, ids: readonly string[]) {
  if (ids.length === 0) return new Set<string>()
  const rows = await db
    .selectFrom('groups')
    .select('id')
    .where('account_id', '=', accountId)
    .where('id', 'in', ids)
    .execute()
  return new Set(rows.map((r) => r.id))
}

/** Users of the account that can belong to groups (a DEACTIVATED user has left them all). */
export async function existingMemberCandidates(
  db: Executor,
  accountId: string,
  ids: readonly string[],
) {
  if (ids.length === 0) return new Set<string>()
  const rows = await db
    .selectFrom('users')
    .select('id')
    .where('account_id', '=', accountId)
    .where('id', 'in', ids)
    .where('status', '!=', 'DEACTIVATED')
    .execute()
  return new Set(rows.map((r) => r.id))
}
