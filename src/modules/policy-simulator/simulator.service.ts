import { errors } from '../../lib/errors.js'
import {
  type Activity,
  type Caller,
  CompiledPolicy,
  type GrantingStatement,
  Grants,
  grantingStatements,
  type PolicySource,
  type Resource,
} from '../../policy/index.js'
import type { BlobsService } from '../blobs/blobs.service.js'
import type { DocumentsService } from '../documents/documents.service.js'
import { type Group, type GroupsService, validatePolicy } from '../groups/groups.service.js'
import type { UserSummary, UsersService } from '../users/users.service.js'
import { parseSimulatedResource, type SimulatedResource } from './simulated-resource.js'

/**
 * The reverse query evaluates every user against every group they belong to; it is refused when
 * the account's users × groups exceeds this (decision: the work is bounded before it starts).
 */
export const DEFAULT_ACCESS_MAX_PAIRS = 250_000

const ALL_ACTIVITIES: readonly Activity[] = ['C', 'R', 'U', 'D']

export interface GrantEntry {
  group_id: string | null
  group_name: string | null
  statement_index: number
  resource_matcher: string
  activities: string
  condition?: string
}

export interface ActivityExplanation {
  activity: Activity
  allowed: boolean
  granted_by: GrantEntry[]
}

export interface Explanation {
  resource: string
  subject: { user_id: string; username: string; status: string } | { policy: true }
  activities: ActivityExplanation[]
}

export interface ExplainInput {
  user_id?: string | undefined
  policy?: unknown
  resource: string
  activities?: string | undefined
}

export interface AccessItem {
  user_id: string
  username: string
  status: string
  activities: string
  granted_by: GrantEntry[]
}

export interface AccessPage {
  resource: string
  items: AccessItem[]
  info: { current_page: number; per_page: number; num_pages: number; total_result_count: number }
}

/** The statements of a subject, the caller their `self` matchers mean, and the engine's grants. */
interface Subject {
  sources: PolicySource[]
  caller: Caller
  grants: Grants
}

function subjectOf(sources: PolicySource[], caller: Caller): Subject {
  // As AuthzService builds a user's grants: one layer, the union of every statement.
  const policy = new CompiledPolicy(sources.flatMap((s) => s.statements))
  return { sources, caller, grants: new Grants([policy], caller) }
}

/**
 * The policy simulator (issue 15): which activities a user's groups (or a pasted policy) allow
 * on a resource and which statement of which group allows each; and the reverse, every user
 * who may do anything on it. The decision is the engine's own (`Grants`, exactly as the request
 * hooks build it from the same statements); the explanation names every statement that grants.
 */
export class PolicySimulatorService {
  constructor(
    private readonly users: UsersService,
    private readonly groups: GroupsService,
    private readonly documents: DocumentsService,
    private readonly blobs: BlobsService,
    private readonly maxPairs = DEFAULT_ACCESS_MAX_PAIRS,
  ) {}

  async explain(accountId: string, input: ExplainInput): Promise<Explanation> {
    const activities = parseActivities(input.activities)
    if (input.user_id !== undefined && input.policy !== undefined)
      throw errors.invalidField('policy', 'must not be given together with user_id')
    if (input.user_id === undefined && input.policy === undefined)
      throw errors.invalidField('user_id', 'or policy is required')
    const pasted = input.policy === undefined ? undefined : validatePolicy(input.policy, 'policy')
    const target = parseSimulatedResource(input.resource)
    let subject: Explanation['subject']
    let who: Subject
    if (pasted) {
      subject = { policy: true }
      // A pasted policy belongs to no user: `self` matchers match nothing, as for a caller
      // without a user.
      who = subjectOf([{ groupId: null, groupName: null, statements: pasted }], { userId: null })
    } else {
      const user = await this.users.summary(accountId, (input.user_id as string).toLowerCase())
      if (!user) throw errors.invalidField('user_id', 'is not a user of this account')
      subject = { user_id: user.id, username: user.username, status: user.status }
      const groups = await this.groups.groupsOfUser(accountId, user.id)
      who = subjectOf(groups.map(sourceOf), { userId: user.id })
    }
    const res = await this.#resolve(accountId, target)
    return {
      resource: target.text,
      subject,
      activities: activities.map((a) => explainActivity(a, target, res, who)),
    }
  }

  async access(
    accountId: string,
    resourceText: string,
    page: number,
    perPage: number,
  ): Promise<AccessPage> {
    const target = parseSimulatedResource(resourceText)
    const [userCount, groupCount] = await Promise.all([
      this.users.countOfAccount(accountId),
      this.groups.countOfAccount(accountId),
    ])
    if (userCount * groupCount > this.maxPairs)
      throw errors.badRequest(
        'SIMULATION_TOO_LARGE',
        `resource: this account has ${userCount} users and ${groupCount} groups; the access query evaluates at most ${this.maxPairs} user × group pairs (ask POST /v1/policy/explain about one user instead)`,
      )
    const res = await this.#resolve(accountId, target)
    const [users, groups] = await Promise.all([
      this.users.summaries(accountId),
      this.groups.allWithMembers(accountId),
    ])
    const groupsOf = new Map<string, Group[]>()
    for (const g of groups)
      for (const u of g.user_ids ?? []) {
        const list = groupsOf.get(u)
        if (list) list.push(g)
        else groupsOf.set(u, [g])
      }
    const items: AccessItem[] = []
    for (const user of users) {
      const item = accessOf(user, groupsOf.get(user.id) ?? [], target, res)
      if (item) items.push(item)
    }
    const start = (page - 1) * perPage
    return {
      resource: target.text,
      items: items.slice(start, start + perPage),
      info: {
        current_page: page,
        per_page: perPage,
        num_pages: Math.ceil(items.length / perPage),
        total_result_count: items.length,
      },
    }
  }

  /** The resource as a request would present it: a Document or BLOB item with its owner. */
  async #resolve(accountId: string, target: SimulatedResource): Promise<Resource> {
    const item = target.ownedItem
    if (!item) return { tokens: target.tokens }
    const owner =
      item.kind === 'Document'
        ? await this.documents.ownerOf(accountId, item.vaultId, item.id)
        : await this.blobs.ownerOf(accountId, item.vaultId, item.id)
    if (owner === undefined)
      throw errors.invalidField(
        'resource',
        `names a ${item.kind === 'Document' ? 'document' : 'BLOB'} this account does not have`,
      )
    return { tokens: target.tokens, ownerId: owner }
  }
}

function sourceOf(group: Group): PolicySource {
  return { groupId: group.id, groupName: group.name, statements: group.policy }
}

function parseActivities(value: string | undefined): Activity[] {
  if (value === undefined) return [...ALL_ACTIVITIES]
  const letters = value.toUpperCase()
  if (letters === '' || !/^[CRUD]+$/.test(letters))
    throw errors.invalidField('activities', 'must be a non-empty string of the letters C, R, U, D')
  return ALL_ACTIVITIES.filter((a) => letters.includes(a))
}

function explainActivity(
  activity: Activity,
  target: SimulatedResource,
  res: Resource,
  who: Subject,
): ActivityExplanation {
  // Reading a listable collection is a list: routes check `readAny`, not R on the collection.
  const mode = activity === 'R' && target.listable ? 'list' : 'item'
  const allowed =
    mode === 'list' ? who.grants.readScopes(res.tokens) !== null : who.grants.can(activity, res)
  const found = grantingStatements(activity, res, who.caller, who.sources, mode)
  return { activity, allowed, granted_by: found.map(entryOf) }
}

function accessOf(
  user: UserSummary,
  groups: readonly Group[],
  target: SimulatedResource,
  res: Resource,
): AccessItem | null {
  const who = subjectOf(groups.map(sourceOf), { userId: user.id })
  let letters = ''
  const entries = new Map<string, GrantEntry>()
  for (const activity of ALL_ACTIVITIES) {
    const explained = explainActivity(activity, target, res, who)
    if (!explained.allowed) continue
    letters += activity
    for (const e of explained.granted_by) entries.set(JSON.stringify(e), e)
  }
  if (letters === '') return null
  return {
    user_id: user.id,
    username: user.username,
    status: user.status,
    activities: letters,
    granted_by: [...entries.values()],
  }
}

function entryOf(g: GrantingStatement): GrantEntry {
  return {
    group_id: g.source.groupId,
    group_name: g.source.groupName,
    statement_index: g.statementIndex,
    resource_matcher: g.matcher,
    activities: g.activities,
    ...(g.condition !== undefined ? { condition: g.condition } : {}),
  }
}
