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
import type { Group } from '../groups/groups.service.js'
import type { SimulatedResource } from './simulated-resource.js'

export const ALL_ACTIVITIES: readonly Activity[] = ['C', 'R', 'U', 'D']

/**
 * Most granting statements an answer names (per activity in an explanation, per user in an
 * access list); `granted_by_truncated` says when more grant. Without it the answer grew with the
 * policy: a 1 MiB pasted policy of one repeated matcher named it tens of thousands of times.
 */
export const MAX_GRANTED_BY = 50

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
  /** Present (true) when more statements grant than `granted_by` names (MAX_GRANTED_BY). */
  granted_by_truncated?: true
}

/** The statements of a subject, the caller their `self` matchers mean, and the engine's grants. */
export interface Subject {
  sources: PolicySource[]
  caller: Caller
  grants: Grants
}

export function subjectOf(sources: PolicySource[], caller: Caller): Subject {
  // As AuthzService builds a user's grants: one layer, the union of every statement.
  const policy = new CompiledPolicy(sources.flatMap((s) => s.statements))
  return { sources, caller, grants: new Grants([policy], caller) }
}

export function sourceOf(group: Group): PolicySource {
  return { groupId: group.id, groupName: group.name, statements: group.policy }
}

/**
 * One activity: `allowed` is the engine's decision (`Grants`, as a request is checked), and
 * `granted_by` every statement that grants it. Reading a listable collection is a list: routes
 * check `readAny` there, not R on the collection alone.
 */
export function explainActivity(
  activity: Activity,
  target: SimulatedResource,
  res: Resource,
  who: Subject,
): ActivityExplanation {
  const mode = activity === 'R' && target.listable ? 'list' : 'item'
  const allowed =
    mode === 'list' ? who.grants.readScopes(res.tokens) !== null : who.grants.can(activity, res)
  const found = grantingStatements(activity, res, who.caller, who.sources, mode)
  return { activity, allowed, granted_by: found.map(entryOf) }
}

/** The explanation as answered: at most MAX_GRANTED_BY statements named. */
export function bounded(e: ActivityExplanation): ActivityExplanation {
  if (e.granted_by.length <= MAX_GRANTED_BY) return e
  return { ...e, granted_by: e.granted_by.slice(0, MAX_GRANTED_BY), granted_by_truncated: true }
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
