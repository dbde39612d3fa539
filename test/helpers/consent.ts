import { createHmac } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { expect } from 'vitest'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { buildConsentApp, type ConsentAppOptions } from '../../src/consent-app.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps, type Deps } from '../../src/deps.js'
import type { RequestDeadlines } from '../../src/http/request-deadline.js'
import { ManualClock } from '../../src/lib/clock.js'
import type { ConsentRateLimits } from '../../src/modules/consent/consent-rate-limit.js'
import type { Store } from '../../src/store/db.js'
import { TEST_ARGON2 } from './app.js'
import { assertDescribed, watchResponses } from './openapi-harness.js'
import { openTestStore } from './store.js'

export const CONSENT = '/api/v1/cmp/consent'
export const TEST_CONSENT_SECRET = 'test consent secret, at least 32 characters long'

export interface ConsentTestOptions {
  clock?: ManualClock
  production?: boolean
  storefrontSecret?: string
  maxSkewSeconds?: number
  secret?: string
  /** Also build the main API on the same deps (to prove the two are apart). */
  withMainApp?: boolean
  logStream?: { write(line: string): void }
  /** The consent API's flood limits; default: too high for any test to reach. */
  rateLimit?: ConsentRateLimits
  unchosenTtlDays?: number
  /** How often the app prunes unchosen records (default: the production hour). */
  pruneIntervalMs?: number
  /** Browser origins allowed to call the consent API (default none: no CORS). */
  cors?: ConsentAppOptions['cors']
  /** SQLite only: a database file and its busy_timeout (tests that lock the file). */
  sqlite?: { file: string; busyTimeoutMs: number }
  /** Deadline of each request's database work (default the production one). */
  deadlines?: RequestDeadlines
  /** Native TLS (a pair loaded with loadTlsMaterial); default plain HTTP. */
  tls?: ConsentAppOptions['tls']
}

const UNREACHABLE_LIMITS: ConsentRateLimits = {
  perAddress: 1_000_000,
  perShop: 1_000_000,
  windowSeconds: 60,
}

export interface ConsentTestApp {
  app: FastifyInstance
  mainApp: FastifyInstance | undefined
  deps: Deps
  store: Store
  clock: ManualClock
  /** GET with these query parameters (in this order; a string is sent as is). */
  get(
    query: Record<string, string> | string,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>
  /** POST a JSON value (or a raw string body) with an optional raw query string. */
  post(
    body: unknown,
    options?: { query?: string; headers?: Record<string, string>; raw?: boolean },
  ): Promise<LightMyRequestResponse>
  close(): Promise<void>
}

export async function buildConsentTestApp(
  options: ConsentTestOptions = {},
): Promise<ConsentTestApp> {
  const store = await openTestStore(
    options.sqlite
      ? { sqliteFile: options.sqlite.file, sqliteBusyTimeoutMs: options.sqlite.busyTimeoutMs }
      : {},
  )
  const blobDir = mkdtempSync(join(tmpdir(), 'coffer-consent-'))
  const clock = options.clock ?? new ManualClock('2026-05-01T10:00:00.000Z')
  const deps = createDeps(store, {
    masterKey: MasterKey.generate(),
    blobStore: new FsBlobStore(blobDir),
    argon2: TEST_ARGON2,
    clock,
    consent: {
      secret: options.secret ?? TEST_CONSENT_SECRET,
      production: options.production ?? false,
      storefrontSecret: options.storefrontSecret,
      maxSkewSeconds: options.maxSkewSeconds ?? 90,
      ...(options.unchosenTtlDays !== undefined
        ? { unchosenTtlDays: options.unchosenTtlDays }
        : {}),
    },
  })
  const app = await buildConsentApp(deps, {
    ...(options.logStream ? { logger: { level: 'info', stream: options.logStream } } : {}),
    rateLimit: options.rateLimit ?? UNREACHABLE_LIMITS,
    ...(options.pruneIntervalMs ? { pruneIntervalMs: options.pruneIntervalMs } : {}),
    ...(options.cors ? { cors: options.cors } : {}),
    ...(options.deadlines ? { deadlines: options.deadlines } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
  })
  // Every answer of the consent listener is checked against its own /openapi.json (issue #17).
  const responses = watchResponses(app)
  await app.ready()
  const mainApp = options.withMainApp ? await buildApp(deps) : undefined
  await mainApp?.ready()
  return {
    app,
    mainApp,
    deps,
    store,
    clock,
    get: (query, headers = {}) =>
      app.inject({
        method: 'GET',
        url: `${CONSENT}?${typeof query === 'string' ? query : new URLSearchParams(query).toString()}`,
        headers,
      }),
    post: (body, o = {}) =>
      app.inject({
        method: 'POST',
        url: o.query === undefined ? CONSENT : `${CONSENT}?${o.query}`,
        headers: { 'content-type': 'application/json', ...(o.headers ?? {}) },
        payload: o.raw ? (body as string) : JSON.stringify(body),
      }),
    close: async () => {
      await app.close()
      await mainApp?.close()
      await store.close()
      rmSync(blobDir, { recursive: true, force: true })
      assertDescribed(responses)
    },
  }
}

export interface ConsentBody {
  jwt: string
  consentAnalytics: boolean | null
  consentAdvertising: boolean | null
  consentPersonalization: boolean | null
  consentTargetedAdvertising: boolean | null
  optedOut: boolean | null
  implicit: boolean | null
  isExisting: boolean
}

/** A 200 consent record, with exactly the spec's fields. */
export function recordOf(res: LightMyRequestResponse): ConsentBody {
  expect(res.statusCode, res.body).toBe(200)
  expect(res.headers['content-type']).toMatch(/^application\/json/)
  expect(res.headers['cache-control']).toBe('no-store')
  const body = res.json() as ConsentBody
  expect(Object.keys(body).sort()).toEqual(
    [
      'consentAdvertising',
      'consentAnalytics',
      'consentPersonalization',
      'consentTargetedAdvertising',
      'implicit',
      'isExisting',
      'jwt',
      'optedOut',
    ].sort(),
  )
  return body
}

/** The consent interface's error body `{"error": message}` with this status. */
export function expectConsentError(res: LightMyRequestResponse, status: number, message: string) {
  expect(res.statusCode, res.body).toBe(status)
  expect(res.headers['cache-control']).toBe('no-store')
  expect(res.headers['content-type']).toMatch(/^application\/json/)
  expect(res.json()).toEqual({ error: message })
}

/** The claims of a token (not verified: the tests read what the server put there). */
export function claimsOf(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1] as string, 'base64url').toString('utf8'))
}

export const emailQuery = (
  email: string,
  shop = 'shop.example',
  extra: Record<string, string> = {},
) => ({
  provider: 'email',
  shop,
  privacy_center_id: 'pc-1',
  customer_email: email,
  ...extra,
})

/**
 * Signs a query the way the App Proxy does, written out independently of src/: decoded pairs,
 * `signature` dropped, repeated keys joined by commas, `k=v` strings sorted by UTF-8 bytes and
 * concatenated, HMAC-SHA256 in hex.
 */
export function proxySign(query: string, secret: string): string {
  const groups = new Map<string, string[]>()
  for (const [k, v] of new URLSearchParams(query)) {
    if (k === 'signature') continue
    groups.set(k, [...(groups.get(k) ?? []), v])
  }
  const parts = [...groups].map(([k, vs]) => `${k}=${vs.join(',')}`)
  parts.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  const signature = createHmac('sha256', secret).update(parts.join('')).digest('hex')
  return `${query}&signature=${signature}`
}
