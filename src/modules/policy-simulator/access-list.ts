import type { Caller, Resource } from '../../policy/index.js'
import type { Group } from '../groups/groups.service.js'
import type { UserSummary } from '../users/users.service.js'
import {
  type ActivityExplanation,
  ALL_ACTIVITIES,
  explainActivity,
  type GrantEntry,
  sourceOf,
  subjectOf,
} from './explain-activity.js'
import type { SimulatedResource } from './simulated-resource.js'

export interface AccessItem {
  user_id: string
  username: string
  status: string
  activities: string
  granted_by: GrantEntry[]
}

/**
 * A caller id no user has. A user's groups decide for them exactly as for this caller unless
 * their id appears in the resource (its tokens or its owner): only `self` matchers depend on the
 * caller, and they match only the resource's own id or owner (`$[id=self.id]`, `$[Owner=self]`),
 * or, in a list's scope, any caller with a user id alike.
 */
const SOMEONE_ELSE: Caller = { userId: '\u0000someone-else' }

/**
 * Every user who may do anything on the resource, by user id. Each group is evaluated once
 * (as SOMEONE_ELSE); a user's answer is the union of their groups' (the engine's policy is that
 * union, and it allows when any statement does), except for the users the resource names,
 * evaluated as themselves. The work is groups × matchers plus the memberships, not users ×
 * every statement.
 */
export function accessItems(
  users: readonly UserSummary[],
  groups: readonly Group[],
  target: SimulatedResource,
  res: Resource,
): AccessItem[] {
  const byGroup = new Map<string, ActivityExplanation[]>()
  for (const g of groups) {
    const who = subjectOf([sourceOf(g)], SOMEONE_ELSE)
    byGroup.set(
      g.id,
      ALL_ACTIVITIES.map((a) => explainActivity(a, target, res, who)),
    )
  }
  const groupsOf = new Map<string, Group[]>()
  for (const g of groups)
    for (const u of g.user_ids ?? []) {
      const list = groupsOf.get(u)
      if (list) list.push(g)
      else groupsOf.set(u, [g])
    }
  const named = namedUsers(res)
  const items: AccessItem[] = []
  for (const user of users) {
    const mine = groupsOf.get(user.id) ?? []
    const verdicts = named(user.id)
      ? ALL_ACTIVITIES.map((a) =>
          explainActivity(a, target, res, subjectOf(mine.map(sourceOf), { userId: user.id })),
        )
      : unionOf(mine.map((g) => byGroup.get(g.id) as ActivityExplanation[]))
    const item = itemOf(user, verdicts)
    if (item) items.push(item)
  }
  return items
}

/** Whether a user id appears in the resource: its tokens (ids, `$[Owner=<id>]`) or its owner. */
function namedUsers(res: Resource): (userId: string) => boolean {
  const text = [...res.tokens, res.ownerId ?? ''].join('\n').toLowerCase()
  return (userId) => text.includes(userId.toLowerCase())
}

function unionOf(perGroup: ActivityExplanation[][]): ActivityExplanation[] {
  return ALL_ACTIVITIES.map((activity, i) => {
    const each = perGroup.map((g) => g[i] as ActivityExplanation)
    return {
      activity,
      allowed: each.some((e) => e.allowed),
      granted_by: each.flatMap((e) => e.granted_by),
    }
  })
}

function itemOf(user: UserSummary, verdicts: ActivityExplanation[]): AccessItem | null {
  let letters = ''
  const entries = new Map<string, GrantEntry>()
  for (const v of verdicts) {
    if (!v.allowed) continue
    letters += v.activity
    for (const e of v.granted_by) entries.set(JSON.stringify(e), e)
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
