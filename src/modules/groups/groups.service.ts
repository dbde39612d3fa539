import type { Actor } from '../../access/principal.js'
import { newTouchedId } from '../../audit/context.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { PolicyFormatError, type PolicyStatement, parsePolicy } from '../../policy/index.js'
import { isForeignKeyViolation, isUniqueViolation } from '../../store/db-errors.js'
import type { Executor } from '../../store/executor.js'
import * as repo from './groups.repo.js'

export interface Group {
  id: string
  name: string
  policy: PolicyStatement[]
  user_ids?: string[]
}

export type MemberOperation = 'APPEND' | 'REMOVE'

export interface GroupChanges {
  name?: string
  policy?: PolicyStatement[]
  userIds?: string[]
  operation: MemberOperation
}

const MAX_NAME = 255

export function validatePolicy(value: unknown, field = 'policy'): PolicyStatement[] {
  try {
    return parsePolicy(value)
  } catch (e) {
    if (e instanceof PolicyFormatError) throw errors.invalidField(field, e.message)
    throw e
  }
}

function validateName(name: unknown): string {
  if (typeof name !== 'string' || name.trim() === '')
    throw errors.invalidField('name', 'is required')
  if (name.length > MAX_NAME)
    throw errors.invalidField('name', `must be at most ${MAX_NAME} characters`)
  // As for usernames; PostgreSQL text cannot even hold NUL (it would be a 500).
  if (/\p{Cc}/u.test(name)) throw errors.invalidField('name', 'must not contain control characters')
  return name
}

function toGroup(row: repo.GroupRow, userIds?: string[]): Group {
  const group: Group = { id: row.id, name: row.name, policy: JSON.parse(row.policy) }
  if (userIds) group.user_ids = userIds
  return group
}

function toPolicyGroup(row: Pick<repo.GroupRow, 'id' | 'name' | 'policy'>): Group {
  return { id: row.id, name: row.name, policy: JSON.parse(row.policy) }
}

/** Groups, their policies and memberships. Every query is scoped to the caller's account. */
export class GroupsService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
  ) {}

  async create(
    accountId: string,
    input: { name: unknown; policy: PolicyStatement[]; userIds: string[] },
  ) {
    const row = this.#newRow(accountId, input)
    return this.#unique(() => this.db.transaction().execute((trx) => this.#insert(trx, row, input)))
  }

  /** `create` inside the caller's transaction (a new account's admin group). */
  createIn(
    trx: Executor,
    accountId: string,
    input: { name: unknown; policy: PolicyStatement[]; userIds: string[] },
  ) {
    return this.#unique(() => this.#insert(trx, this.#newRow(accountId, input), input))
  }

  #newRow(accountId: string, input: { name: unknown; policy: PolicyStatement[] }): repo.GroupRow {
    const now = this.clock.now().toISOString()
    return {
      account_id: accountId,
      id: newTouchedId('group'),
      name: validateName(input.name),
      policy: JSON.stringify(input.policy),
      created_at: now,
      updated_at: now,
    }
  }

  async #insert(trx: Executor, row: repo.GroupRow, input: { userIds: string[] }) {
    await repo.insert(trx, row)
    // Unknown user ids are ignored (spec, POST /v1/groups).
    const known = await repo.existingMemberCandidates(trx, row.account_id, input.userIds)
    await repo.addMembers(
      trx,
      row.account_id,
      row.id,
      input.userIds.filter((id) => known.has(id)),
    )
    return toGroup(row, await repo.memberIds(trx, row.account_id, row.id))
  }

  async get(accountId: string, id: string, full: boolean): Promise<Group> {
    const row = await this.#find(this.db, accountId, id)
    return toGroup(row, full ? await repo.memberIds(this.db, accountId, id) : undefined)
  }

  async list(actor: Actor): Promise<Group[]> {
    const scopes = actor.grants.readScopes(['Group', ''])
    // Fail closed: without any readable scope the route's check should already have refused.
    if (!scopes) throw errors.permissionDenied()
    const rows = await repo.list(this.db, actor.principal.accountId, scopes)
    return rows.map((r) => toGroup(r))
  }

  /** Rename, replace the policy, and APPEND or REMOVE members (unknown or absent ones ignored). */
  async update(accountId: string, id: string, changes: GroupChanges): Promise<Group> {
    return this.#unique(() =>
      this.db.transaction().execute(async (trx) => {
        await this.#find(trx, accountId, id)
        const patch: Parameters<typeof repo.update>[3] = {
          updated_at: this.clock.now().toISOString(),
        }
        if (changes.name !== undefined) patch.name = validateName(changes.name)
        if (changes.policy !== undefined) patch.policy = JSON.stringify(changes.policy)
        await repo.update(trx, accountId, id, patch)
        const userIds = changes.userIds ?? []
        if (changes.operation === 'REMOVE') await repo.removeMembers(trx, accountId, id, userIds)
        else {
          const known = await repo.existingMemberCandidates(trx, accountId, userIds)
          await repo.addMembers(
            trx,
            accountId,
            id,
            userIds.filter((u) => known.has(u)),
          )
        }
        const row = await this.#find(trx, accountId, id)
        return toGroup(row, await repo.memberIds(trx, accountId, id))
      }),
    )
  }

  /** Adds users to a group; every user must exist, or nothing changes (404). */
  async addMembers(accountId: string, id: string, userIds: string[]): Promise<void> {
    await this.#unique(() =>
      this.db.transaction().execute(async (trx) => {
        await this.#find(trx, accountId, id)
        const known = await repo.existingMemberCandidates(trx, accountId, userIds)
        if (userIds.some((u) => !known.has(u))) throw errors.notFound('One or more users')
        await repo.addMembers(trx, accountId, id, userIds)
      }),
    )
  }

  /** Removes users from a group; every listed user must be a member, or nothing changes (404). */
  async removeMembers(accountId: string, id: string, userIds: string[]): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await this.#find(trx, accountId, id)
      const members = new Set(await repo.memberIds(trx, accountId, id))
      if (userIds.some((u) => !members.has(u))) throw errors.notFound('Group membership')
      await repo.removeMembers(trx, accountId, id, userIds)
    })
  }

  async delete(accountId: string, id: string): Promise<Group> {
    return this.db.transaction().execute(async (trx) => {
      const row = await this.#find(trx, accountId, id)
      await repo.remove(trx, accountId, id)
      return toGroup(row)
    })
  }

  /** Every policy statement of every group of the user: the input of the policy engine. */
  async policiesOfUser(accountId: string, userId: string): Promise<PolicyStatement[]> {
    const texts = await this.policyTextsOfUser(accountId, userId)
    return texts.flatMap((t) => JSON.parse(t) as PolicyStatement[])
  }

  /** The stored JSON of each group policy of the user, sorted (a stable cache key). */
  async policyTextsOfUser(accountId: string, userId: string): Promise<string[]> {
    return (await repo.policiesOfUser(this.db, accountId, userId)).sort()
  }

  /** The groups of the user with their policies, by id (the policy simulator names them). */
  async groupsOfUser(accountId: string, userId: string): Promise<Group[]> {
    return (await repo.groupsOfUser(this.db, accountId, userId)).map(toPolicyGroup)
  }

  /** Every group of the account with its policy and members, by id (the policy simulator). */
  async allWithMembers(accountId: string): Promise<Group[]> {
    const [rows, memberships] = await Promise.all([
      repo.allOfAccount(this.db, accountId),
      repo.allMemberships(this.db, accountId),
    ])
    const members = new Map<string, string[]>(rows.map((r) => [r.id, []]))
    for (const m of memberships) members.get(m.group_id)?.push(m.user_id)
    return rows.map((r) => ({ ...toPolicyGroup(r), user_ids: members.get(r.id) ?? [] }))
  }

  countOfAccount(accountId: string): Promise<number> {
    return repo.countOfAccount(this.db, accountId)
  }

  /** user id → group ids, for `full` user reads. */
  async groupIdsOfUsers(
    accountId: string,
    userIds: readonly string[],
  ): Promise<Map<string, string[]>> {
    const map = new Map<string, string[]>(userIds.map((u) => [u, []]))
    for (const r of await repo.membershipsOf(this.db, accountId, userIds))
      map.get(r.user_id)?.push(r.group_id)
    return map
  }

  async assertGroupsExist(
    db: Executor,
    accountId: string,
    groupIds: readonly string[],
  ): Promise<void> {
    const found = await repo.existingGroupIds(db, accountId, groupIds)
    const missing = groupIds.find((g) => !found.has(g))
    if (missing) throw errors.invalidField('group_ids', `contains an unknown group: ${missing}`)
  }

  async addUserToGroups(
    db: Executor,
    accountId: string,
    userId: string,
    groupIds: readonly string[],
  ) {
    for (const g of groupIds) await repo.addMembers(db, accountId, g, [userId])
  }

  removeUserFromAll(db: Executor, accountId: string, userId: string): Promise<void> {
    return repo.removeUserFromAll(db, accountId, userId)
  }

  async #find(db: Executor, accountId: string, id: string): Promise<repo.GroupRow> {
    const row = await repo.findById(db, accountId, id)
    if (!row) throw errors.notFound('Group')
    return row
  }

  async #unique<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run()
    } catch (e) {
      if (isUniqueViolation(e)) throw errors.conflict('name', 'is already used by another group')
      // A concurrent DELETE removed the group after this request read it (PostgreSQL).
      if (isForeignKeyViolation(e)) throw errors.notFound('Group')
      throw e
    }
  }
}
