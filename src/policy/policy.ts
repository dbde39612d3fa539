import { ANY, type MatchOptions, matches, ownerSelector, SELF_ID, tokenize } from './matcher.js'
import type { Activity, Caller, PolicyStatement, Requirement, Resource } from './types.js'

export class PolicyFormatError extends Error {}

const MAX_MATCHER_LENGTH = 1024
const ACTIVITY_LETTERS = /^[CRUDA]*$/

/**
 * Validates a policy as clients send it (parsed JSON) and returns it normalized to
 * `[{Resources: string[], Activities: string}]`. `Resource` (singular) and a single string for
 * `Resources` are accepted because TrueVault's own material uses both spellings. The letter `A`
 * appears in TrueVault's default admin group; it is kept but grants nothing.
 */
export function parsePolicy(value: unknown): PolicyStatement[] {
  if (!Array.isArray(value)) throw new PolicyFormatError('must be a JSON array of policy objects')
  return value.map((raw, i) => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new PolicyFormatError(`[${i}] must be an object with Resources and Activities`)
    }
    const item = raw as Record<string, unknown>
    const rawResources = item.Resources ?? item.Resource
    const resources = typeof rawResources === 'string' ? [rawResources] : rawResources
    if (!Array.isArray(resources) || resources.some((r) => typeof r !== 'string')) {
      throw new PolicyFormatError(`[${i}].Resources must be an array of strings`)
    }
    for (const r of resources as string[]) {
      if (r.length === 0 || r.length > MAX_MATCHER_LENGTH || /\p{Cc}/u.test(r)) {
        throw new PolicyFormatError(`[${i}].Resources holds an invalid resource matcher`)
      }
    }
    if (typeof item.Activities !== 'string') {
      throw new PolicyFormatError(`[${i}].Activities must be a string of the letters C, R, U, D`)
    }
    const activities = item.Activities.toUpperCase()
    if (!ACTIVITY_LETTERS.test(activities)) {
      throw new PolicyFormatError(`[${i}].Activities must be a string of the letters C, R, U, D`)
    }
    return { Resources: resources as string[], Activities: activities }
  })
}

interface CompiledStatement {
  activities: string
  matchers: string[][]
}

/** A policy ready for evaluation: the union of every statement of every group it came from. */
export class CompiledPolicy {
  readonly #statements: CompiledStatement[]
  /** Grants nothing at all (asked on every request: computed once). */
  readonly isEmpty: boolean

  constructor(statements: readonly PolicyStatement[]) {
    this.#statements = statements.map((s) => ({
      activities: s.Activities,
      matchers: s.Resources.map(tokenize),
    }))
    this.isEmpty = this.#statements.every(
      (s) => s.matchers.length === 0 || !/[CRUD]/.test(s.activities),
    )
  }

  /** Default deny: allowed only when a statement with the letter has a matching matcher. */
  allows(activity: Activity, res: Resource, caller: Caller, options?: MatchOptions): boolean {
    for (const s of this.#statements) {
      if (!s.activities.includes(activity)) continue
      for (const m of s.matchers) if (matches(m, res, caller, options)) return true
    }
    return false
  }

  /** Which items of a collection this policy lets the caller read (see `ItemScope`). */
  readScope(collection: readonly string[], caller: Caller): ItemScope | null {
    return this.scope('R', collection, caller)
  }

  /** Which items of a collection this policy grants `activity` on, or null when none at all. */
  scope(activity: Activity, collection: readonly string[], caller: Caller): ItemScope | null {
    const scope = emptyScope()
    let covered = false
    for (const s of this.#statements) {
      if (!s.activities.includes(activity)) continue
      for (const m of s.matchers) if (addMatcherScope(scope, m, collection, caller)) covered = true
    }
    return covered ? scope : null
  }
}

/**
 * What one matcher adds to a collection's scope: false when it covers neither the collection nor
 * any of its items. The policy simulator asks the same question per matcher, so it cannot
 * disagree with `scope`.
 */
export function addMatcherScope(
  scope: ItemScope,
  m: readonly string[],
  collection: readonly string[],
  caller: Caller,
): boolean {
  if (m.length !== collection.length) return false
  const last = collection.length - 1
  if (!matches(m.slice(0, last), { tokens: collection.slice(0, last) }, caller)) return false
  // A matcher that can cover neither the collection nor any item (e.g. `User::$[Owner=.*]`,
  // or `$[id=self.id]` without a calling user) does not make the list readable.
  return addItemToken(scope, m[last] as string, m[last - 1] as string, caller)
}

/**
 * The readable items of a collection, compiled so a repository can turn it into a SQL predicate:
 * every item (`all`), items by id, or Document/Blob items by owner (`anyOwner`: any owned item).
 */
export interface ItemScope {
  all: boolean
  ids: Set<string>
  ownerIds: Set<string>
  anyOwner: boolean
}

export function emptyScope(): ItemScope {
  return { all: false, ids: new Set(), ownerIds: new Set(), anyOwner: false }
}

/** Adds what one matcher's last token covers; false when it covers nothing, not even the list. */
function addItemToken(scope: ItemScope, token: string, type: string, caller: Caller): boolean {
  if (token === '') return true
  if (token === ANY) {
    scope.all = true
    return true
  }
  if (token === SELF_ID) {
    if ((type !== 'User' && type !== 'GroupMembership') || !caller.userId) return false
    scope.ids.add(caller.userId.toLowerCase())
    return true
  }
  const owner = ownerSelector(token)
  if (owner !== undefined) {
    if (type !== 'Document' && type !== 'Blob') return false
    if (owner === ANY) scope.anyOwner = true
    else if (owner === 'self') {
      if (!caller.userId) return false
      scope.ownerIds.add(caller.userId.toLowerCase())
    } else scope.ownerIds.add(owner.toLowerCase())
    return true
  }
  scope.ids.add(token.toLowerCase())
  return true
}

/** True when an item passes every scope (a SAT's scope and its creator's both apply). */
export function inScopes(
  scopes: readonly ItemScope[],
  item: { id: string; ownerId?: string | null },
): boolean {
  return scopes.every(
    (s) =>
      s.all ||
      s.ids.has(item.id.toLowerCase()) ||
      (item.ownerId != null && (s.anyOwner || s.ownerIds.has(item.ownerId.toLowerCase()))),
  )
}

/**
 * What a principal may do. A user has one layer (the union of their groups' policies); a SAT has
 * two, its own policy and its creator's current one, and every layer must allow: a token never
 * exceeds the user who minted it.
 */
export class Grants {
  constructor(
    readonly layers: readonly CompiledPolicy[],
    readonly caller: Caller,
  ) {}

  /** A principal whose policies grant nothing at all (e.g. a user in no group). */
  get isEmpty(): boolean {
    return this.layers.length === 0 || this.layers.some((p) => p.isEmpty)
  }

  can(activity: Activity, res: Resource, options?: MatchOptions): boolean {
    if (this.layers.length === 0) return false
    return this.layers.every((p) => p.allows(activity, res, this.caller, options))
  }

  satisfies(req: Requirement): boolean {
    if ('allOf' in req) return req.allOf.every((r) => this.satisfies(r))
    if ('anyOf' in req) return req.anyOf.some((r) => this.satisfies(r))
    if ('readAny' in req) return this.readScopes(req.readAny.tokens) !== null
    if ('anyItem' in req)
      return this.scopes(req.anyItem.activity, req.anyItem.collection.tokens) !== null
    return this.can(req.activity, req.resource)
  }

  /** One scope per layer (all must hold), or null when some layer grants no read at all. */
  readScopes(collection: readonly string[]): ItemScope[] | null {
    return this.scopes('R', collection)
  }

  /** As `readScopes`, for any activity. */
  scopes(activity: Activity, collection: readonly string[]): ItemScope[] | null {
    if (this.layers.length === 0) return null
    const scopes: ItemScope[] = []
    for (const p of this.layers) {
      const s = p.scope(activity, collection, this.caller)
      if (!s) return null
      scopes.push(s)
    }
    return scopes
  }
}
