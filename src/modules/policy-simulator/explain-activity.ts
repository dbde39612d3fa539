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
