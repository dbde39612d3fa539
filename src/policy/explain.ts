import { ANY, matches, ownerSelector, SELF_ID, tokenize } from './matcher.js'
import { addMatcherScope, emptyScope } from './policy.js'
import type { Activity, Caller, PolicyStatement, Resource } from './types.js'

/**
 * The policy simulator's half of the engine: *which* statements grant an activity, matcher by
 * matcher, using the very functions the engine decides with (`matches` for one resource,
 * `addMatcherScope` for a list). The engine itself stops at the first match; this keeps going
 * so every granting statement is named.
 */

/** Where statements come from: a group (id and name) or a pasted policy (both null). */
export interface PolicySource {
  groupId: string | null
  groupName: string | null
  statements: readonly PolicyStatement[]
}

export interface GrantingStatement {
  source: PolicySource
  statementIndex: number
  /** The matcher as written in the statement. */
  matcher: string
  /**
   * The statement's Activities, each letter once (first occurrence first): a policy may spell
   * them at any length, and an answer naming many statements would repeat them whole.
   */
  activities: string
  /** What the match depended on beyond the resource's text, e.g. `owner=self` (see below). */
  condition?: string
}

/**
 * `item`: the activity on this resource, as a route checks one resource (`Grants.can`).
 * `list`: reading a listable collection, as list routes check it (`readAny`): a matcher of the
 * collection or of any of its items lets the list answer, showing only what it covers.
 */
export type CheckMode = 'item' | 'list'

export function grantingStatements(
  activity: Activity,
  res: Resource,
  caller: Caller,
  sources: readonly PolicySource[],
  mode: CheckMode,
): GrantingStatement[] {
  const found: GrantingStatement[] = []
  for (const source of sources) {
    source.statements.forEach((statement, statementIndex) => {
      if (!statement.Activities.includes(activity)) return
      const activities = [...new Set(statement.Activities)].join('')
      for (const matcher of statement.Resources) {
        const tokens = tokenize(matcher)
        const condition =
          mode === 'list' ? listCondition(tokens, res, caller) : itemCondition(tokens, res, caller)
        if (condition === null) continue
        found.push({
          source,
          statementIndex,
          matcher,
          activities,
          ...(condition !== '' ? { condition } : {}),
        })
      }
    })
  }
  return found
}

/** null: no match; '': an unconditional match; else what the match depended on. */
function itemCondition(m: readonly string[], res: Resource, caller: Caller): string | null {
  if (!matches(m, res, caller)) return null
  const last = m[m.length - 1] as string
  const owner = ownerSelector(last)
  if (owner !== undefined) return ownerCondition(owner)
  return m.includes(SELF_ID) ? 'id=self' : ''
}

function listCondition(m: readonly string[], res: Resource, caller: Caller): string | null {
  if (!addMatcherScope(emptyScope(), m, res.tokens, caller)) return null
  const last = m[m.length - 1] as string
  if (last === '' || last === ANY) return ''
  if (last === SELF_ID) return 'list: only the item id=self'
  const owner = ownerSelector(last)
  if (owner !== undefined) return `list: only items with ${ownerCondition(owner)}`
  return `list: only the item id=${last}`
}

function ownerCondition(owner: string): string {
  if (owner === ANY) return 'owner=any'
  return owner === 'self' ? 'owner=self' : `owner=${owner}`
}
