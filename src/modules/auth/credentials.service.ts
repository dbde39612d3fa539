import type {
  ActiveCredential,
  CredentialResolver,
  RequestedExpiry,
  UserCredentials,
} from '../../access/credentials.js'
import { ExactCache } from '../../access/exact-cache.js'
import { digestSecret, randomCredential } from '../../crypto/secrets.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { parseFutureTime } from '../../lib/input.js'
import type { Executor } from '../../store/executor.js'
import type { RightsFeed } from '../../store/rights-feed.js'
import type { SettingsChange } from '../settings/settings.service.js'
import * as repo from './credentials.repo.js'

/** Default access-token life (spec, Limits). */
export const ACCESS_TOKEN_TTL_MS = 24 * 60 * 60 * 1000
/** Default server-wide maximum access-token life (`COFFER_ACCESS_TOKEN_MAX_DAYS`). */
export const DEFAULT_ACCESS_TOKEN_MAX_DAYS = 30
const DAY_MS = 24 * 60 * 60 * 1000

/** A requested access-token expiry (normalized ISO text) and the field it came in. */
/** The account's cap on access-token life, in seconds (null: none): modules/settings. */
export interface TokenCapSource {
  tokenCapSeconds(accountId: string, db: Executor): Promise<number | null>
}

/**
 * API keys and access tokens: 216 random bits in 36 characters (`randomCredential`: the length
 * of TrueVault's credentials), shown once, stored only as SHA-256 digests and looked up by
 * digest, whatever their length: the 43-character ones of earlier releases keep working. An
 * exact-match index lookup on a digest of a high-entropy secret leaks nothing through timing,
 * so no further comparison is needed.
 */
export class CredentialsService implements CredentialResolver, UserCredentials {
  /** Resolved credentials by digest (issue 21): exact, emptied by every change of a right. */
  readonly #resolved: ExactCache<{ credential: ActiveCredential; policies: string[] }>

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    /** The account's own cap (account settings), read where each token is issued. */
    private readonly caps: TokenCapSource,
    /** Tells the cache of resolved credentials when a right may have changed. */
    rights: RightsFeed,
    /** Longest life a requested access token may have, in days (never below the 24 h default). */
    private readonly maxTokenDays = DEFAULT_ACCESS_TOKEN_MAX_DAYS,
  ) {
    // Weighed by what may be large: the policies' text (and the user's attributes).
    this.#resolved = new ExactCache(rights, {
      weigh: (v) =>
        256 + v.credential.attributes.length + v.policies.reduce((n, p) => n + p.length, 0),
    })
  }

  /** Credentials the cache holds now (tests show it is in use). */
  get cachedCredentials(): number {
    return this.#resolved.entries
  }

  /** The credential, from the cache when it holds it (read with its policies otherwise). */
  async resolve(secret: string): Promise<ActiveCredential | undefined> {
    return (await this.resolveWithPolicies(secret))?.credential
  }

  /**
   * `resolve` plus the user's group policies (JSON texts, sorted): cached, or one query. The
   * cache's ticket is taken before the query, so a result that raced a change is not stored.
   */
  async resolveWithPolicies(
    secret: string,
  ): Promise<{ credential: ActiveCredential; policies: string[] } | undefined> {
    const digest = digestSecret(secret)
    const now = this.clock.now()
    const cached = this.#resolved.get(digest, now.getTime())
    if (cached) return cached
    const ticket = this.#resolved.ticket()
    const found = await repo.findUsableWithPolicies(this.db, digest, now.toISOString())
    if (!found) return undefined
    // Shared by every request that hits the entry: frozen, so none can change another's view.
    const value = Object.freeze({
      credential: Object.freeze(found.credential),
      policies: Object.freeze(found.policies) as string[],
    })
    this.#resolved.set(digest, value, now.getTime(), found.endsAtMs, ticket)
    return value
  }

  /**
   * A requested access-token expiry as stored (normalized ISO text), or undefined for the default
   * life. A session must end: beyond the server's maximum life, 400 naming `field`. Every route
   * that issues an access token (login, user create and update, the token route) reads it here;
   * the account's own cap is checked where the token is issued (`issueAccessToken`).
   */
  accessTokenExpiry(value: unknown, field: string): RequestedExpiry | undefined {
    if (value === undefined || value === '') return undefined
    const now = this.clock.now()
    const iso = parseFutureTime(value, field, now)
    if (Date.parse(iso) - now.getTime() > this.maxTokenDays * DAY_MS)
      throw errors.invalidField(field, `must be at most ${this.maxTokenDays} days from now`)
    return { at: iso, field }
  }

  /**
   * Issues a new access token. Its life is the requested one or 24 hours, and never longer than
   * the account's `max_access_token_duration_seconds`: a requested expiry beyond the cap is a
   * 400 naming its field, the default life is shortened to the cap. Every access token of every
   * flow is issued here (login, user create and update, the token route).
   */
  async issueAccessToken(
    db: Executor,
    accountId: string,
    userId: string,
    requested?: RequestedExpiry,
  ): Promise<string> {
    const now = this.clock.now()
    const cap = await this.caps.tokenCapSeconds(accountId, db)
    const capMs = cap === null ? Number.POSITIVE_INFINITY : cap * 1000
    if (requested && Date.parse(requested.at) - now.getTime() > capMs)
      throw errors.invalidField(
        requested.field,
        `must be at most ${cap} seconds from now (the account's max_access_token_duration_seconds)`,
      )
    const expiresAt =
      requested?.at ?? new Date(now.getTime() + Math.min(ACCESS_TOKEN_TTL_MS, capMs)).toISOString()
    const token = randomCredential()
    await repo.insert(db, {
      digest: digestSecret(token),
      account_id: accountId,
      user_id: userId,
      kind: 'access_token',
      expires_at: expiresAt,
      created_at: now.toISOString(),
    })
    return token
  }

  /**
   * A settings change that sets a cap (settings hook, in its transaction): every stored access
   * token of the account is shortened to it, so the tokens it ends stay ended should the cap be
   * raised or removed later. (Resolution checks the current cap too: a token issued while the
   * change commits is held to it all the same.)
   */
  async applyTokenCap(db: Executor, change: SettingsChange): Promise<void> {
    const cap = change.after.max_access_token_duration_seconds
    if (!change.changed.includes('max_access_token_duration_seconds') || cap === null) return
    await repo.clampAccessTokens(db, change.accountId, cap, this.clock.now().toISOString())
  }

  /** Issues the user's API key, replacing any previous one at once (one key per user). */
  async replaceApiKey(db: Executor, accountId: string, userId: string): Promise<string> {
    const key = randomCredential()
    await repo.deleteForUser(db, accountId, userId, 'api_key')
    await repo.insert(db, {
      digest: digestSecret(key),
      account_id: accountId,
      user_id: userId,
      kind: 'api_key',
      expires_at: null,
      created_at: this.clock.now().toISOString(),
    })
    return key
  }

  /** Logout: revokes exactly the token used. Returns false when it was already gone. */
  async revoke(accountId: string, digest: string): Promise<boolean> {
    return (await repo.deleteByDigest(this.db, accountId, digest)) > 0
  }

  /**
   * Ends the user's sessions: every access token but `keepDigest` (the one a request came with).
   * API keys are not sessions and stay. Returns how many ended.
   */
  revokeAccessTokens(
    db: Executor,
    accountId: string,
    userId: string,
    keepDigest?: string,
  ): Promise<number> {
    return repo.deleteAccessTokens(db, accountId, userId, keepDigest)
  }

  /** `POST /v1/auth/logout_all`: every access token of the user ends, the caller's included. */
  endAllSessions(accountId: string, userId: string): Promise<number> {
    return repo.deleteAccessTokens(this.db, accountId, userId)
  }

  /** Deactivation: every API key and access token of the user stops working. */
  revokeAll(db: Executor, accountId: string, userId: string): Promise<void> {
    return repo.deleteForUser(db, accountId, userId)
  }
}
