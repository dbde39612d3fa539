import type { Clock } from '../../lib/clock.js'
import { newId } from '../../lib/ids.js'
import type { Executor } from '../../store/executor.js'
import * as repo from './consent.repo.js'
import { consentErrors } from './consent-errors.js'
import {
  type ConsentQuery,
  type ConsentUpdate,
  parseConsentQuery,
  parseConsentUpdate,
} from './consent-input.js'
import type { ConsentKeys } from './consent-keys.js'
import { type ConsentView, columnsOf, preferencesOf, viewOf } from './consent-view.js'
import {
  afterLapse,
  isLapsed,
  lapsesAt,
  NO_PREFERENCES,
  PREFERENCE_FIELDS,
  type Preferences,
} from './retention.js'
import { type QueryPairs, verifyAppProxy } from './signature.js'
import type { ConsentTokens } from './token.js'

export interface ConsentOptions {
  /** COFFER_ENV=production: storefront signatures are checked. */
  production: boolean
  storefrontSecret: string | undefined
  maxSkewSeconds: number
  /**
   * Days a record nobody ever chose for may stay unread before `pruneUnchosen` removes it
   * (COFFER_CONSENT_UNCHOSEN_TTL_DAYS, default 30): anonymous GETs must not grow the database
   * for ever.
   */
  unchosenTtlDays?: number
}

export const DEFAULT_UNCHOSEN_TTL_DAYS = 30
/** A read marks an unchosen record as in use at most this often (one write a day, not one a read). */
const TOUCH_INTERVAL_MS = 86_400_000
/**
 * Records read (and at most removed) per transaction by `pruneUnchosen`: small, so that on
 * SQLite (synchronous, in the serving process) one batch holds the event loop for
 * milliseconds, not seconds.
 */
const PRUNE_PAGE = 500
/** Lets queued requests run between two batches (SQLite work never yields by itself). */
const yieldToRequests = () => new Promise<void>((resolve) => setImmediate(resolve))

/** What a request says about how the choice was made (kept with each change as evidence). */
export interface RequestEvidence {
  /** The request carried `Sec-GPC: 1`. */
  gpc: boolean
  userAgent: string | undefined
}

const MAX_USER_AGENT = 512
const seconds = (at: Date) => Math.floor(at.getTime() / 1000)
const dateOrNull = (text: string | null) => (text === null ? null : new Date(text))

/**
 * The consumer-consent interface: records keyed by shop and consumer (not by Coffer account),
 * consent tokens, storefront signatures, the 180-day life of a choice, and the history.
 */
export class ConsentService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    readonly keys: ConsentKeys,
    private readonly tokens: ConsentTokens,
    private readonly options: ConsentOptions,
  ) {}

  /** GET: the consumer's record, created when unknown or started afresh when lapsed. */
  async read(pairs: QueryPairs, evidence: RequestEvidence): Promise<ConsentView> {
    const query = parseConsentQuery(pairs)
    if (query.provider === 'storefront') {
      this.#verifyStorefront(pairs)
      if (!query.customerId) throw consentErrors.notLoggedIn()
    }
    const identifier = (query.customerId ?? query.email) as string
    const digest = this.keys.digest(query.shop, identifier)
    const now = this.clock.now()
    let row = await repo.findRecord(this.db, query.shop, digest)
    let existing = true
    if (!row) {
      ;({ row, existing } = await this.#create(query, identifier, digest, now, evidence))
    } else if (isLapsed(dateOrNull(row.choice_at), now)) {
      row = await this.#restart(row, now, query)
      // A kept opt-out is still an explicit choice on an existing record.
      existing = hasAnyPreference(row)
    } else {
      const moved =
        row.last_provider !== query.provider ||
        row.last_privacy_center_id !== query.privacyCenterId ||
        (query.clientId !== undefined && query.clientId !== row.last_client_id)
      // An unchosen record in use is kept (pruneUnchosen removes only untouched ones).
      const touch =
        row.choice_at === null &&
        now.getTime() - new Date(row.updated_at).getTime() >= TOUCH_INTERVAL_MS
      if (moved || touch) {
        await repo.updateLastSeen(this.db, query.shop, digest, {
          ...lastSeen(query, row.last_client_id),
          ...(touch ? { updated_at: now.toISOString() } : {}),
        })
      }
    }
    const jwt = this.tokens.sign({
      consumerIdentifier: identifier,
      consumerPartition: query.shop,
      // Never before the lapse epoch: tokens from before a lapse are refused by `iat`.
      iat: Math.max(seconds(now), Number(row.token_epoch)),
    })
    return viewOf(row, jwt, existing)
  }

  /** POST: changes only the fields sent; the token must name a record whose choice is valid. */
  async update(body: unknown, pairs: QueryPairs, evidence: RequestEvidence): Promise<ConsentView> {
    const input = parseConsentUpdate(body)
    const shops = pairs.filter(([key]) => key === 'shop')
    if (shops.length > 1) throw consentErrors.repeated('shop')
    // A POST through the App Proxy carries its signed parameters too: checked alike, and the
    // token must belong to the shop it came through.
    if (pairs.some(([key]) => key === 'signature')) this.#verifyStorefront(pairs)
    const claims = await this.tokens.verify(input.jwt)
    if (!claims) throw consentErrors.noRecord()
    const shop = claims.consumerPartition
    if (shops.length === 1 && shops[0]?.[1] !== shop) throw consentErrors.noRecord()
    const digest = this.keys.digest(shop, claims.consumerIdentifier)
    const now = this.clock.now()
    return this.db.transaction().execute(async (trx) => {
      const row = await repo.findRecordForUpdate(trx, shop, digest)
      if (
        !row ||
        claims.iat < Number(row.token_epoch) ||
        isLapsed(dateOrNull(row.choice_at), now)
      ) {
        throw consentErrors.noRecord()
      }
      return this.#apply(trx, row, input, now, evidence)
    })
  }

  async #apply(
    trx: Executor,
    row: repo.ConsentRecordRow,
    input: ConsentUpdate,
    now: Date,
    evidence: RequestEvidence,
  ): Promise<ConsentView> {
    const before = preferencesOf(row)
    const after: Preferences = { ...before, ...input.changes }
    const at = now.toISOString()
    await repo.updatePreferences(trx, row.shop, row.consumer_digest, {
      ...columnsOf(after),
      choice_at: at,
      updated_at: at,
    })
    const changes: Record<string, { from: boolean | null; to: boolean | null }> = {}
    for (const field of PREFERENCE_FIELDS) {
      if (field in input.changes) changes[field] = { from: before[field], to: after[field] }
    }
    await repo.appendEvent(trx, {
      ...eventBase(row, at, 'updated'),
      provider: row.last_provider,
      privacy_center_id: row.last_privacy_center_id,
      client_id: row.last_client_id,
      changes: JSON.stringify(changes),
      state: JSON.stringify(after),
      ...evidenceColumns(evidence),
    })
    return { jwt: input.jwt, ...after, implicit: false, isExisting: true }
  }

  async #create(
    query: ConsentQuery,
    identifier: string,
    digest: string,
    now: Date,
    evidence: RequestEvidence,
  ): Promise<{ row: repo.ConsentRecordRow; existing: boolean }> {
    const at = now.toISOString()
    const row: repo.ConsentRecordRow = {
      shop: query.shop,
      consumer_digest: digest,
      consumer_sealed: this.keys.seal(query.shop, digest, identifier),
      consumer_kind: query.provider === 'email' ? 'email' : 'customer_id',
      ...columnsOf(NO_PREFERENCES),
      choice_at: null,
      token_epoch: seconds(now),
      ...lastSeen(query, null),
      created_at: at,
      updated_at: at,
    }
    const created = await this.db.transaction().execute(async (trx) => {
      if (!(await repo.insertRecord(trx, row))) return false
      await repo.appendEvent(trx, {
        ...eventBase(row, at, 'created'),
        provider: query.provider,
        privacy_center_id: query.privacyCenterId,
        client_id: query.clientId ?? null,
        changes: '{}',
        state: JSON.stringify(NO_PREFERENCES),
        ...evidenceColumns(evidence),
      })
      return true
    })
    if (created) return { row, existing: false }
    // Another request created it meanwhile.
    const winner = await repo.findRecord(this.db, query.shop, digest)
    if (!winner) throw new Error('consent record vanished after a conflicting insert')
    return { row: winner, existing: true }
  }

  /**
   * A lapsed choice reads as unknown again: preferences reset (opt-outs kept), tokens issued
   * before the lapse refused, and a `lapsed` event dated at the moment it lapsed.
   */
  async #restart(
    row: repo.ConsentRecordRow,
    now: Date,
    query: ConsentQuery,
  ): Promise<repo.ConsentRecordRow> {
    const lapsedAt = lapsesAt(dateOrNull(row.choice_at)) as Date
    const before = preferencesOf(row)
    const after = afterLapse(before)
    const values = {
      ...columnsOf(after),
      // Rounded up: a token issued in the very second of the lapse, before it, is refused too.
      token_epoch: Math.ceil(lapsedAt.getTime() / 1000),
      // The next change is recorded against where the consumer is now, not before the lapse.
      ...lastSeen(query, row.last_client_id),
      updated_at: now.toISOString(),
    }
    const choiceAt = row.choice_at as string
    await this.db.transaction().execute(async (trx) => {
      if (!(await repo.resetLapsed(trx, row.shop, row.consumer_digest, choiceAt, values))) return
      const changes: Record<string, { from: boolean | null; to: null }> = {}
      for (const field of PREFERENCE_FIELDS) {
        if (before[field] !== after[field]) changes[field] = { from: before[field], to: null }
      }
      await repo.appendEvent(trx, {
        ...eventBase(row, lapsedAt.toISOString(), 'lapsed'),
        provider: null,
        privacy_center_id: null,
        client_id: null,
        changes: JSON.stringify(changes),
        state: JSON.stringify(after),
        gpc: null,
        user_agent: null,
      })
    })
    return { ...row, ...values, choice_at: null }
  }

  /**
   * Removes the records GETs created that nobody ever chose for and nobody has read for
   * `unchosenTtlDays`, and appends an `expired` event for each in the same transaction, so the
   * history (never rewritten) still tells why a later GET finds no record and creates one
   * anew. Safe to run on every node at once. Returns how many were removed.
   */
  async pruneUnchosen(): Promise<number> {
    const now = this.clock.now()
    const ttlDays = this.options.unchosenTtlDays ?? DEFAULT_UNCHOSEN_TTL_DAYS
    const cutoff = new Date(now.getTime() - ttlDays * 86_400_000).toISOString()
    const at = now.toISOString()
    let removed = 0
    let after: repo.RecordKey | undefined
    for (;;) {
      const batch = await this.db.transaction().execute(async (trx) => {
        const { expired, last } = await repo.deleteUnchosen(trx, cutoff, PRUNE_PAGE, after)
        after = last
        await repo.appendEvents(
          trx,
          expired.map((record) => ({
            shop: record.shop,
            id: newId(),
            consumer_digest: record.consumer_digest,
            at,
            action: 'expired',
            provider: record.last_provider,
            privacy_center_id: record.last_privacy_center_id,
            client_id: record.last_client_id,
            changes: '{}',
            state: JSON.stringify(NO_PREFERENCES),
            gpc: null,
            user_agent: null,
          })),
        )
        return expired.length
      })
      removed += batch
      if (after === undefined) return removed
      await yieldToRequests()
    }
  }

  /** Production only: the App Proxy signature over the query (spec, Authentication 8). */
  #verifyStorefront(pairs: QueryPairs): void {
    if (!this.options.production) return
    const secret = this.options.storefrontSecret
    if (!secret) throw consentErrors.storefrontSecretMissing()
    const check = verifyAppProxy(pairs, {
      secret,
      nowSeconds: seconds(this.clock.now()),
      maxSkewSeconds: this.options.maxSkewSeconds,
    })
    if (!check.ok) throw consentErrors.signatureFailed()
  }
}

function lastSeen(query: ConsentQuery, previousClientId: string | null) {
  return {
    last_provider: query.provider,
    last_privacy_center_id: query.privacyCenterId,
    last_client_id: query.clientId ?? previousClientId,
  }
}

function eventBase(row: repo.ConsentRecordRow, at: string, action: string) {
  return { shop: row.shop, id: newId(), consumer_digest: row.consumer_digest, at, action }
}

function evidenceColumns(evidence: RequestEvidence) {
  return {
    gpc: evidence.gpc ? 1 : 0,
    user_agent: evidence.userAgent?.slice(0, MAX_USER_AGENT) ?? null,
  }
}

function hasAnyPreference(row: repo.ConsentRecordRow): boolean {
  const preferences = preferencesOf(row)
  return PREFERENCE_FIELDS.some((field) => preferences[field] !== null)
}
