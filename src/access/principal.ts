import type { Grants } from '../policy/index.js'

/** Credential kinds the spec names per endpoint. */
export type CredentialKind = 'api_key' | 'access_token' | 'sat'

/** A user acting through an API key or an access token. */
export interface UserPrincipal {
  kind: 'user'
  via: 'api_key' | 'access_token'
  accountId: string
  userId: string
  /** Digest of the credential used, so logout can revoke exactly that token. */
  credentialDigest: string
  /** The user as read while authenticating this request (no secrets). */
  user: UserSnapshot
  /**
   * The user's group policies (JSON texts, sorted) when they were read together with the
   * credential — done for policy-checked routes, so authorization needs no second query.
   */
  groupPolicies?: string[]
}

/** The public columns of a user row: what `self` routes show. */
export interface UserSnapshot {
  id: string
  account_id: string
  username: string
  status: string
  attributes: string
  mfa_enrolled: number
}

/** A scoped access token: its own policy, bounded by its creator's current permissions. */
export interface SatPrincipal {
  kind: 'sat'
  accountId: string
  satId: string
  creatorId: string
  /** Its policy as stored (JSON text): compiled policies are cached by their text. */
  policy: string
  /** Policies (JSON texts) of the SATs that minted this one, nearest first (none: a user did). */
  ancestorPolicies: string[]
  /** Whether it has a use limit (such a token may not mint others: they would outlive it). */
  limited: boolean
  /** The session (access-token digest) it lives within, if it was minted through one. */
  sessionDigest: string | null
}

export type Principal = UserPrincipal | SatPrincipal

export function credentialKind(p: Principal): CredentialKind {
  return p.kind === 'sat' ? 'sat' : p.via
}

/** What services receive for a request: who is asking and what they may do. */
export interface Actor {
  principal: Principal
  grants: Grants
}

/** Builds what a principal may do from its groups' current policies (modules/auth implements it). */
export interface GrantsBuilder {
  grantsFor(principal: Principal): Promise<Grants>
}

/** Resolves a SAT's `http_auth` pair to a principal, and takes a use once a request is let in. */
export interface ScopedTokenResolver {
  resolve(username: string, secret: string): Promise<SatPrincipal | null>
  /** One use, atomically; false when none is left (or the token expired meanwhile). */
  consume(principal: SatPrincipal): Promise<boolean>
}
