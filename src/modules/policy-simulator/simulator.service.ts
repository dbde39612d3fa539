import { auditTouch } from '../../audit/context.js'
import { errors } from '../../lib/errors.js'
import type { Activity, Resource } from '../../policy/index.js'
import type { BlobsService } from '../blobs/blobs.service.js'
import type { DocumentsService } from '../documents/documents.service.js'
import { type GroupsService, validatePolicy } from '../groups/groups.service.js'
import type { UsersService } from '../users/users.service.js'
import { type AccessItem, accessItems } from './access-list.js'
import { auditResourceIds } from './audit-resources.js'
import {
  type ActivityExplanation,
  ALL_ACTIVITIES,
  bounded,
  explainActivity,
  type Subject,
  sourceOf,
  subjectOf,
} from './explain-activity.js'
import { parseSimulatedResource, type SimulatedResource } from './simulated-resource.js'

/**
 * The reverse query reads every user and every membership of the account and evaluates each
 * group once (access-list.ts); it is refused before any of that when the account's users ×
 * groups exceeds this, which bounds the memberships read (e.g. 2,500 users × 100 groups).
 */
export const DEFAULT_ACCESS_MAX_PAIRS = 250_000

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

export interface AccessPage {
  resource: string
  items: AccessItem[]
  info: { current_page: number; per_page: number; num_pages: number; total_result_count: number }
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
      auditTouch('user', user.id)
      const groups = await this.groups.groupsOfUser(accountId, user.id)
      who = subjectOf(groups.map(sourceOf), { userId: user.id })
    }
    const res = await this.#resolve(accountId, target)
    auditResourceIds(target.tokens)
    return {
      resource: target.text,
      subject,
      activities: activities.map((a) => bounded(explainActivity(a, target, res, who))),
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
    // At least one group counts, so the users read are bounded even in an account with none.
    if (userCount * Math.max(groupCount, 1) > this.maxPairs)
      throw errors.badRequest(
        'SIMULATION_TOO_LARGE',
        `resource: this account has ${userCount} users and ${groupCount} groups; the access query evaluates at most ${this.maxPairs} user × group pairs (ask POST /v1/policy/explain about one user instead)`,
      )
    const res = await this.#resolve(accountId, target)
    const [users, groups] = await Promise.all([
      this.users.summaries(accountId),
      this.groups.allWithMembers(accountId),
    ])
    const items = accessItems(users, groups, target, res)
    const start = (page - 1) * perPage
    const shown = items.slice(start, start + perPage)
    auditResourceIds(target.tokens)
    // The answer names these users and what they may do: the event names them too.
    auditTouch(
      'user',
      shown.map((i) => i.user_id),
    )
    return {
      resource: target.text,
      items: shown,
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

function parseActivities(value: string | undefined): Activity[] {
  if (value === undefined) return [...ALL_ACTIVITIES]
  const letters = value.toUpperCase()
  if (letters === '' || !/^[CRUD]+$/.test(letters))
    throw errors.invalidField('activities', 'must be a non-empty string of the letters C, R, U, D')
  return ALL_ACTIVITIES.filter((a) => letters.includes(a))
}
