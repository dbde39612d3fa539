import type { Executor } from '../store/executor.js'

/**
 * Ports of the credentials every route's caller presents (modules/auth/credentials.service.ts
 * implements both; src/deps.ts wires it): the HTTP layer and the users feature use them without
 * importing the auth feature, which itself depends on users.
 */

/** An API key or access token as found for a presented secret, with its user's public columns. */
export interface ActiveCredential {
  digest: string
  account_id: string
  user_id: string
  kind: 'api_key' | 'access_token'
  /** The user's public columns, read in the same query (self routes need nothing more). */
  username: string
  status: string
  attributes: string
  mfa_enrolled: number
}

/** What the auth hooks ask: the usable credential a presented secret names, if any. */
export interface CredentialResolver {
  resolve(secret: string): Promise<ActiveCredential | undefined>
  /** `resolve` plus the user's group policies (JSON texts, sorted), in one query. */
  resolveWithPolicies(
    secret: string,
  ): Promise<{ credential: ActiveCredential; policies: string[] } | undefined>
}

/** An access-token expiry a client asked for, and the field it came in (named by a refusal). */
export interface RequestedExpiry {
  at: string
  field: string
}

/** What the users feature asks: vend, end and bound a user's API key and access tokens. */
export interface UserCredentials {
  /** A requested access-token expiry as stored, undefined for the default; 400 naming `field`. */
  accessTokenExpiry(value: unknown, field: string): RequestedExpiry | undefined
  /** A new access token; beyond the account's token cap, 400 naming the request's field. */
  issueAccessToken(
    db: Executor,
    accountId: string,
    userId: string,
    requested?: RequestedExpiry,
  ): Promise<string>
  /** The user's one API key, replacing any previous one. */
  replaceApiKey(db: Executor, accountId: string, userId: string): Promise<string>
  /** Every access token of the user but `keepDigest`; how many ended. */
  revokeAccessTokens(
    db: Executor,
    accountId: string,
    userId: string,
    keepDigest?: string,
  ): Promise<number>
  /** Every API key and access token of the user. */
  revokeAll(db: Executor, accountId: string, userId: string): Promise<void>
}
