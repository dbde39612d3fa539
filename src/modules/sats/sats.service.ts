import type { Principal, SatPrincipal, ScopedTokenResolver } from '../../access/principal.js'
import { newTouchedId } from '../../audit/context.js'
import { digestSecret, randomSecret, safeEqual } from '../../crypto/secrets.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { isUuid } from '../../lib/ids.js'
import { parseFutureTime } from '../../lib/input.js'
import { type Meter, noopMeter } from '../../metrics/meter.js'
import { CompiledPolicy, type PolicyStatement, resource } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import { validatePolicy } from '../groups/groups.service.js'
import * as repo from './sats.repo.js'

export const SAT_PREFIX = 'sat-'
export const MAX_SAT_NAME = 100
/** A SAT minted by a SAT minted by …: the chain is walked on every request, so it is bounded. */
export const MAX_SAT_DEPTH = 8
const MAX_ALLOWED_USES = 2_147_483_647
/**
 * What a SAT's own policy must grant (C) for it to create SATs through the API. No group policy
 * names it (the spec has no SAT resource), so only a token made for minting can mint: a public
 * forgot-password SAT cannot (issue 10, finding 8). The server's own reset tokens need no grant.
 */
export const SAT_MINTING = resource('ScopedAccessToken', '')
/** Live (unexpired, unspent) SATs one SAT may have minted through the API at a time. */
export const MAX_LIVE_CHILDREN = 100
/** Live SATs minted through the API for one user at a time, by the user or their SATs. */
export const MAX_LIVE_SATS_PER_USER = 1000
/** Users whose credentials still act (as for API keys and access tokens). */
const USABLE_CREATOR = new Set(['ACTIVATED', 'PENDING'])

/** A SAT as every endpoint shows it; `http_auth` is added only in the creation response. */
export interface SatView {
  id: string
  name: string
  policy: PolicyStatement[]
  not_valid_after: string
  allowed_uses: number | null
  consumed_uses: number
}

export interface CreatedSat extends SatView {
  http_auth: { username: string; password: string }
}

/** A SAT about to be stored. */
interface MintInput {
  accountId: string
  creatorId: string
  parentId: string | null
  name: string
  policy: PolicyStatement[]
  notValidAfter: { text: string; iso: string }
  allowedUses: number | null
  /** The access token (digest) it lives within; null when none (an API key, the server). */
  sessionDigest: string | null
}

export interface SatInput {
  name?: unknown
  policy?: unknown
  not_valid_after?: unknown
  allowed_uses?: unknown
}

/**
 * Scoped access tokens: creation, management, and authentication of their `http_auth` pairs.
 * A SAT's grants are its own policy, every ancestor's (when a SAT minted it) and its creator's
 * current group policies, all of which must allow (modules/auth/authz.service.ts).
 */
export class SatsService implements ScopedTokenResolver {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly meter: Meter = noopMeter,
  ) {}

  async create(principal: Principal, input: SatInput): Promise<CreatedSat> {
    const now = this.clock.now()
    const name = validateName(input.name)
    const policy = validateSatPolicy(input.policy)
    const notValidAfter = validateExpiry(input.not_valid_after, now)
    const allowedUses = validateAllowedUses(input.allowed_uses)
    this.assertMayMint(principal)
    const { row, password } = await this.#mintWithinLimits({
      accountId: principal.accountId,
      creatorId: principal.kind === 'sat' ? principal.creatorId : principal.userId,
      parentId: principal.kind === 'sat' ? principal.satId : null,
      name,
      policy,
      notValidAfter,
      allowedUses,
      sessionDigest: sessionOf(principal),
    })
    return { ...view(row), http_auth: { username: `${SAT_PREFIX}${row.id}`, password } }
  }

  /** Whether the principal may create SATs at all (checked before a SAT's use is taken). */
  assertMayMint(principal: Principal): void {
    if (principal.kind !== 'sat') return
    // A child's uses are its own: minted from a limited token it would outlive the limit (a
    // single-use reset link could mint an unlimited one).
    if (principal.limited) {
      throw errors.badRequest(
        'SAT_CANNOT_MINT',
        'A scoped access token with a use limit cannot create scoped access tokens',
      )
    }
    const own = new CompiledPolicy(JSON.parse(principal.policy) as PolicyStatement[])
    if (!own.allows('C', SAT_MINTING, { userId: principal.creatorId })) {
      throw errors.badRequest(
        'SAT_CANNOT_MINT',
        'A scoped access token can create scoped access tokens only when its policy grants C on ScopedAccessToken::',
      )
    }
    if (principal.ancestorPolicies.length + 1 >= MAX_SAT_DEPTH) {
      throw errors.badRequest(
        'SAT_CHAIN_TOO_DEEP',
        `A scoped access token can be minted through at most ${MAX_SAT_DEPTH} tokens`,
      )
    }
  }

  /**
   * A SAT made by the server on someone's behalf (a password reset email's credential): acts for
   * `creatorId`, under `parentId` when given. Returns the Basic credential and its id.
   */
  async issue(input: {
    accountId: string
    creatorId: string
    parentId: string | null
    name: string
    policy: PolicyStatement[]
    expiresAt: Date
    allowedUses: number
  }): Promise<{ id: string; username: string; password: string }> {
    const iso = input.expiresAt.toISOString()
    const { row, password } = await this.#mint({
      ...input,
      notValidAfter: { text: iso, iso },
      sessionDigest: null,
    })
    return { id: row.id, username: `${SAT_PREFIX}${row.id}`, password }
  }

  /**
   * `#mint` for a SAT asked for through the API: the caller's live tokens are bounded, so nobody
   * can fill the database with them (expired and spent ones do not count). The limits are
   * checked after the insert in the same transaction, under a lock on the creator's row
   * (PostgreSQL; SQLite has one writer), so concurrent requests on any node cannot overshoot.
   */
  async #mintWithinLimits(input: MintInput): Promise<{ row: repo.SatRow; password: string }> {
    return this.db.transaction().execute(async (trx) => {
      await repo.lockCreator(trx, input.accountId, input.creatorId)
      const minted = await this.#mint(input, trx)
      const now = this.clock.now().toISOString()
      const live = await repo.countLive(trx, input.accountId, { creatorId: input.creatorId }, now)
      if (live > MAX_LIVE_SATS_PER_USER)
        throw errors.badRequest(
          'TOO_MANY_SATS',
          `A user may have at most ${MAX_LIVE_SATS_PER_USER} live scoped access tokens`,
        )
      if (input.parentId !== null) {
        const children = await repo.countLive(
          trx,
          input.accountId,
          { parentId: input.parentId },
          now,
        )
        if (children > MAX_LIVE_CHILDREN)
          throw errors.badRequest(
            'TOO_MANY_CHILD_SATS',
            `A scoped access token may have at most ${MAX_LIVE_CHILDREN} live tokens it created`,
          )
      }
      return minted
    })
  }

  /** Stores a new SAT; its secret exists only in the returned value, the row holds a digest. */
  async #mint(
    input: MintInput,
    db: Executor = this.db,
  ): Promise<{ row: repo.SatRow; password: string }> {
    const now = this.clock.now()
    const password = randomSecret()
    const row: repo.SatRow = {
      account_id: input.accountId,
      id: newTouchedId('scoped_access_token', now.getTime()),
      creator_id: input.creatorId,
      parent_id: input.parentId,
      name: input.name,
      policy: JSON.stringify(input.policy),
      not_valid_after: input.notValidAfter.text,
      expires_at: input.notValidAfter.iso,
      allowed_uses: input.allowedUses,
      consumed_uses: 0,
      secret_digest: digestSecret(password),
      created_at: now.toISOString(),
      session_digest: input.sessionDigest,
    }
    await repo.insert(db, row)
    return { row, password }
  }

  /**
   * `issue`, replacing every earlier token issued with the same name, policy, creator and parent
   * (a newer reset link supersedes older ones, and spent or expired ones do not pile up) — unless
   * one was issued within `cooldownMs`: then nothing is issued and null returned.
   */
  async issueReplacing(
    input: Parameters<SatsService['issue']>[0],
    cooldownMs: number,
  ): Promise<{ id: string; username: string; password: string } | null> {
    const key = {
      accountId: input.accountId,
      creatorId: input.creatorId,
      parentId: input.parentId,
      policy: JSON.stringify(input.policy),
    }
    const since = new Date(this.clock.now().getTime() - cooldownMs).toISOString()
    if (await repo.issuedSince(this.db, key, input.name, since)) return null
    await repo.removeIssued(this.db, key, input.name)
    return this.issue(input)
  }

  /** A SAT the principal manages (see `get`), as its row; undefined when there is none. */
  findManaged(principal: Principal, tokenId: string): Promise<repo.SatRow | undefined> {
    return repo.findOwned(this.db, principal.accountId, ownerOf(principal), tokenId)
  }

  /** A SAT of the account by id, whoever manages it (server-side use only). */
  findById(accountId: string, id: string): Promise<repo.SatRow | undefined> {
    return repo.find(this.db, accountId, id)
  }

  /** Deletes a SAT the server issued (one that never reached its recipient). */
  async revoke(accountId: string, id: string): Promise<void> {
    await repo.remove(this.db, accountId, id)
  }

  /** Whether the SAT exists and is unexpired (a flow's linked SAT, before it lends its bounds). */
  async isLive(accountId: string, id: string): Promise<boolean> {
    const row = await repo.find(this.db, accountId, id)
    return row !== undefined && row.expires_at > this.clock.now().toISOString()
  }

  async list(principal: Principal, page: number, perPage: number) {
    const { rows, total } = await repo.listOwned(
      this.db,
      principal.accountId,
      ownerOf(principal),
      page,
      perPage,
    )
    return { items: rows.map(view), page, per_page: perPage, total }
  }

  async get(principal: Principal, tokenId: string): Promise<SatView> {
    const row = await repo.findOwned(this.db, principal.accountId, ownerOf(principal), tokenId)
    if (!row) throw errors.notFound('Scoped access token')
    return view(row)
  }

  /** Revokes at once: the next request with it (or with any SAT it minted) is refused. */
  async delete(principal: Principal, tokenId: string): Promise<void> {
    const row = await repo.findOwned(this.db, principal.accountId, ownerOf(principal), tokenId)
    if (!row || !(await repo.remove(this.db, principal.accountId, row.id))) {
      throw errors.notFound('Scoped access token')
    }
  }

  /**
   * `http_auth` → principal, or null when the pair is wrong or the token (or an ancestor) is
   * deleted, expired, used up, or its creator can no longer act. Nothing is consumed here: a use
   * is taken by `consume` once the request is let through.
   */
  async resolve(username: string, password: string): Promise<SatPrincipal | null> {
    const id = satIdOf(username)
    if (!id) return null
    // The password's digest names the account (directory); a wrong password finds none.
    const digest = digestSecret(password)
    const row = await repo.findBySecret(this.db, id, digest)
    // The digest comparison runs even for an unknown id, so timing does not tell ids apart.
    const matches = safeEqual(row?.secret_digest ?? '', digest)
    if (!row || !matches) return null
    const now = this.clock.now().toISOString()
    if (!isLive(row, now) || !USABLE_CREATOR.has(row.creator_status)) return null
    if (!sessionLive(row, now)) return null
    const ancestorPolicies: string[] = []
    for (let parentId = row.parent_id; parentId !== null; ) {
      const parent = await repo.find(this.db, row.account_id, parentId)
      // An ancestor that is gone or expired has no permissions left to lend.
      if (!parent || parent.expires_at <= now || ancestorPolicies.length >= MAX_SAT_DEPTH)
        return null
      ancestorPolicies.push(parent.policy)
      parentId = parent.parent_id
    }
    return {
      kind: 'sat',
      accountId: row.account_id,
      satId: row.id,
      creatorId: row.creator_id,
      policy: row.policy,
      ancestorPolicies,
      limited: row.allowed_uses !== null,
      sessionDigest: row.session_digest,
    }
  }

  /** Takes one use; false when a concurrent request took the last one or it just expired. */
  async consume(principal: SatPrincipal): Promise<boolean> {
    const taken = await repo.consumeUse(
      this.db,
      principal.accountId,
      principal.satId,
      this.clock.now().toISOString(),
    )
    if (taken) this.meter.count('sat_uses', {})
    return taken
  }
}

function isLive(row: repo.SatRow, now: string): boolean {
  if (row.expires_at <= now) return false
  return row.allowed_uses === null || row.consumed_uses < row.allowed_uses
}

/**
 * A SAT minted through a session works only while that access token does: a password change,
 * a reset, logout or logout_all (which delete it), its expiry or the account's cap on
 * access-token life end the SAT too, so a stolen session cannot mint itself a credential that
 * outlives it (security review, finding 7).
 */
function sessionLive(row: repo.SatWithCreator, now: string): boolean {
  if (row.session_digest === null) return true
  if (row.session_found === null) return false
  if (row.session_token_cap !== null && row.session_created_at !== null) {
    const end = Date.parse(row.session_created_at) + Number(row.session_token_cap) * 1000
    if (end <= Date.parse(now)) return false
  }
  return row.session_expires_at === null || row.session_expires_at > now
}

/** The session a new SAT lives within: the caller's access token, or its own SAT's session. */
function sessionOf(principal: Principal): string | null {
  if (principal.kind === 'sat') return principal.sessionDigest
  return principal.via === 'access_token' ? principal.credentialDigest : null
}

function ownerOf(principal: Principal): repo.SatOwner {
  return principal.kind === 'sat' ? { parentId: principal.satId } : { creatorId: principal.userId }
}

/** `sat-<uuid>` (the form `http_auth.username` has) → the id. */
export function satIdOf(username: string): string | null {
  if (!username.toLowerCase().startsWith(SAT_PREFIX)) return null
  const id = username.slice(SAT_PREFIX.length).toLowerCase()
  return isUuid(id) ? id : null
}

function view(row: repo.SatRow): SatView {
  return {
    id: row.id,
    name: row.name,
    policy: JSON.parse(row.policy),
    not_valid_after: row.not_valid_after,
    allowed_uses: row.allowed_uses === null ? null : Number(row.allowed_uses),
    consumed_uses: Number(row.consumed_uses),
  }
}

/** Policies are compiled on every request the token makes: their size is bounded. */
export const MAX_SAT_POLICY_STATEMENTS = 100
export const MAX_SAT_POLICY_MATCHERS = 500

/** Stored bytes of a policy (its JSON text, UTF-8): a statement can hold a very long resource. */
export const MAX_SAT_POLICY_BYTES = 64 * 1024

function validateSatPolicy(value: unknown): PolicyStatement[] {
  const policy = validatePolicy(value)
  if (Buffer.byteLength(JSON.stringify(policy)) > MAX_SAT_POLICY_BYTES)
    throw errors.invalidField('policy', `must be at most ${MAX_SAT_POLICY_BYTES} bytes as JSON`)
  if (policy.length > MAX_SAT_POLICY_STATEMENTS)
    throw errors.invalidField('policy', `must hold at most ${MAX_SAT_POLICY_STATEMENTS} statements`)
  const matchers = policy.reduce((n, s) => n + s.Resources.length, 0)
  if (matchers > MAX_SAT_POLICY_MATCHERS)
    throw errors.invalidField('policy', `must name at most ${MAX_SAT_POLICY_MATCHERS} resources`)
  return policy
}

function validateName(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw errors.invalidField('name', 'is required')
  if (value.length > MAX_SAT_NAME)
    throw errors.invalidField('name', `must be at most ${MAX_SAT_NAME} characters`)
  if (/\p{Cc}/u.test(value))
    throw errors.invalidField('name', 'must not contain control characters')
  return value
}

/** ISO 8601 in zulu time (spec); kept verbatim for display, normalised for comparisons. */
function validateExpiry(value: unknown, now: Date): { text: string; iso: string } {
  if (value === undefined || value === null || value === '')
    throw errors.invalidField('not_valid_after', 'is required')
  const iso = parseFutureTime(value, 'not_valid_after', now)
  const text = (value as string).trim()
  if (!/T.*Z$/i.test(text))
    throw errors.invalidField('not_valid_after', 'must be an ISO 8601 time in UTC ending in Z')
  return { text, iso }
}

/** Absent or null: no limit (the SDK omits it; a listing can show null, spec). */
function validateAllowedUses(value: unknown): number | null {
  if (value === undefined || value === null) return null
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < 1 ||
    value > MAX_ALLOWED_USES
  )
    throw errors.invalidField('allowed_uses', `must be an integer from 1 to ${MAX_ALLOWED_USES}`)
  return value
}
