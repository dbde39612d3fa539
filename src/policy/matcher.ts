import type { Caller, Resource } from './types.js'

/**
 * Resource matching exactly as docs/policy-semantics.md defines it. A matcher and a resource are
 * split on `::`; they match when they have the same number of tokens and every token matches. Even
 * positions are type names (`Vault`, `Document`) and must be equal; odd positions are ids, where
 * `.*` matches any one token (including the empty last token of a collection), `$[id=self.id]`
 * after `User` or `GroupMembership` matches the caller, and `$[Owner=…]` as the last token after
 * `Document` or `Blob` matches items owned by the caller, a given user, or anyone — never unowned
 * items. No regular expression is ever evaluated: `.*` is a keyword.
 */
export const ANY = '.*'
export const SELF_ID = '$[id=self.id]'
const OWNER_RE = /^\$\[Owner=(.+)\]$/

const SELF_TYPES = new Set(['User', 'GroupMembership'])
const OWNED_TYPES = new Set(['Document', 'Blob'])

export interface MatchOptions {
  /** When false, `$[id=self.id]` matchers grant nothing (a user changing their own status). */
  allowSelf?: boolean
}

/** The owner named by an owner selector token, or undefined when the token is not one. */
export function ownerSelector(token: string): string | undefined {
  return OWNER_RE.exec(token)?.[1]
}

export function tokenize(matcher: string): string[] {
  return matcher.split('::')
}

function sameId(a: string, b: string): boolean {
  return a === b || a.toLowerCase() === b.toLowerCase()
}

function ownerMatches(selector: string, owner: string, caller: Caller): boolean {
  if (selector === ANY) return true
  if (selector === 'self') return caller.userId !== null && sameId(owner, caller.userId)
  return sameId(selector, owner)
}

/** Does one id-position matcher token cover the resource token at index `i`? */
function idTokenMatches(
  m: string,
  i: number,
  matcher: readonly string[],
  res: Resource,
  caller: Caller,
  options: MatchOptions,
): boolean {
  const r = res.tokens[i] as string
  if (m === ANY) return true
  const type = matcher[i - 1] as string
  if (m === SELF_ID) {
    return (
      options.allowSelf !== false &&
      SELF_TYPES.has(type) &&
      caller.userId !== null &&
      sameId(r, caller.userId)
    )
  }
  const wanted = ownerSelector(m)
  if (wanted !== undefined) {
    if (i !== matcher.length - 1 || !OWNED_TYPES.has(type)) return false
    const scopedOwner = ownerSelector(r)
    if (scopedOwner !== undefined) return ownerMatches(wanted, scopedOwner, caller)
    return r !== '' && res.ownerId != null && ownerMatches(wanted, res.ownerId, caller)
  }
  // An owner-scoped resource (`…::$[Owner=X]`) is covered only by `.*` or an owner matcher,
  // never by a literal token that merely equals it case-insensitively (`$[owner=X]`).
  return ownerSelector(r) === undefined && sameId(m, r)
}

export function matches(
  matcher: readonly string[],
  res: Resource,
  caller: Caller,
  options: MatchOptions = {},
): boolean {
  if (matcher.length !== res.tokens.length) return false
  for (let i = 0; i < matcher.length; i++) {
    const m = matcher[i] as string
    if (i % 2 === 0) {
      if (m !== res.tokens[i]) return false
    } else if (!idTokenMatches(m, i, matcher, res, caller, options)) {
      return false
    }
  }
  return true
}
