import type { Caller, Resource } from '../../policy/index.js'
import type { Group } from '../groups/groups.service.js'
import type { UserSummary } from '../users/users.service.js'
import {
  type ActivityExplanation,
  ALL_ACTIVITIES,
  explainActivity,
  type GrantEntry,
  MAX_GRANTED_BY,
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
  /** Present (true) when more statements grant than `granted_by` names (MAX_GRANTED_BY). */
  granted_by_truncated?: true
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
  const byGroup = new Map<string, GroupAnswer>()
  for (const g of groups) {
    const who = subjectOf([sourceOf(g)], SOMEONE_ELSE)
    byGroup.set(g.id, groupAnswer(ALL_ACTIVITIES.map((a) => explainActivity(a, target, res, who))))
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
    const parts = named(user.id)
      ? [
          groupAnswer(
            ALL_ACTIVITIES.map((a) =>
              explainActivity(a, target, res, subjectOf(mine.map(sourceOf), { userId: user.id })),
            ),
          ),
        ]
      : mine.map((g) => byGroup.get(g.id) as GroupAnswer)
    const item = itemOf(user, parts)
    if (item) items.push(item)
  }
  return items
}

/**
 * What a group (or a user evaluated alone) answers: the letters allowed and, per activity in
 * CRUD order, the granting entries not already named for an earlier activity (a statement with
 * RU grants both, and is named once).
 */
interface GroupAnswer {
  allowed: boolean[]
  fresh: GrantEntry[][]
}

function groupAnswer(verdicts: ActivityExplanation[]): GroupAnswer {
  const seen = new Set<string>()
  return {
    allowed: verdicts.map((v) => v.allowed),
    fresh: verdicts.map((v) =>
      v.granted_by.filter((e) => {
        const key = JSON.stringify(e)
        if (seen.has(key)) return false
        seen.add(key)
        return true
      }),
    ),
  }
}

/** Whether a user id appears in the resource: its tokens (ids, `$[Owner=<id>]`) or its owner. */
function namedUsers(res: Resource): (userId: string) => boolean {
  const text = [...res.tokens, res.ownerId ?? ''].join('\n').toLowerCase()
  return (userId) => text.includes(userId.toLowerCase())
}

/**
 * A user's item from their groups' answers: the engine's policy is the union of the groups'
 * statements, and it allows when any statement does. Entries of different groups differ (they
 * name their group), so none is named twice. At most MAX_GRANTED_BY entries are taken, so a
 * user's work is bounded by their groups, not by the statements those groups hold.
 */
function itemOf(user: UserSummary, parts: readonly GroupAnswer[]): AccessItem | null {
  const letters = ALL_ACTIVITIES.filter((_, i) => parts.some((p) => p.allowed[i])).join('')
  if (letters === '') return null
  const shown: GrantEntry[] = []
  let total = 0
  ALL_ACTIVITIES.forEach((_, i) => {
    for (const p of parts) {
      const fresh = p.fresh[i] as GrantEntry[]
      total += fresh.length
      for (const e of fresh) {
        if (shown.length === MAX_GRANTED_BY) break
        shown.push(e)
      }
    }
  })
  return {
    user_id: user.id,
    username: user.username,
    status: user.status,
    activities: letters,
    granted_by: shown,
    ...(total > MAX_GRANTED_BY ? { granted_by_truncated: true as const } : {}),
  }
}
