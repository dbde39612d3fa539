import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { type AppOptions, buildApp } from '../../src/app.js'
import type { BlobStore } from '../../src/blob/blob-store.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import type { ProviderConfig } from '../../src/config.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import type { HashingLimits, PasswordHasherOptions } from '../../src/crypto/passwords.js'
import { createDeps, type Deps, type DepsOptions } from '../../src/deps.js'
import type { Clock } from '../../src/lib/clock.js'
import type { AccountCredentials } from '../../src/modules/accounts/accounts.service.js'
import type { LoginLimits } from '../../src/modules/auth/login-throttle.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import type { FreeSpaceFloor } from '../../src/storage/free-space-floor.js'
import { assertDescribed, type ResponseWatch, watchResponses } from './openapi-harness.js'
import { openTestStore } from './store.js'

/** Cheap argon2 parameters keep the suite fast; production uses the OWASP ones. */
export const TEST_ARGON2 = { memoryCost: 1024, timeCost: 1 }
/**
 * Cheap hashes need no queue bound: tests that fire hundreds of parallel logins measure the
 * login limits, not the hashing queue (tests of the queue pass their own limits).
 */
export const TEST_HASHING_LIMITS = { maxConcurrent: 2, maxQueued: 100_000 }

export interface Admin extends AccountCredentials {
  userId: string
}

export interface TestApp {
  app: FastifyInstance
  deps: Deps
  /** Admin of the first account (full access). */
  admin: Admin
  api: Api
  /** Every response checked against `/openapi.json`; `api` and `close` fail on a mismatch. */
  responses: ResponseWatch
  /** A second, independent account with its own admin. */
  newAccount(): Promise<Admin>
  close(): Promise<void>
}

export interface TestAppOptions {
  clock?: Clock
  /** Default: a filesystem store in a fresh temp folder. */
  blobStore?: BlobStore
  masterKey?: MasterKey
  /** Messaging providers (see helpers/providers.ts); default: nowhere (see NO_PROVIDERS). */
  providers?: ProviderConfig
  /** SQLite only: a database file instead of memory (tests that read the bytes on disk). */
  sqliteFile?: string
  /** The app's logger (tests that read what is logged); default: none. */
  logger?: AppOptions['logger']
  /** Told when a password reset email could not be sent (see DepsOptions). */
  onResetEmailError?: (error: unknown, context: { flowId: string }) => void
  /** PostgreSQL bound on each search statement (default: the production one). */
  searchTimeoutMs?: number
  /** Searches at once (PostgreSQL) and queued (default the production ones). */
  searchLimits?: DepsOptions['searchLimits']
  /** SQLite file only: search worker threads (default the production count) and their module. */
  sqliteReadWorkers?: number
  sqliteReadWorkerUrl?: URL
  /** The candidate-set size from which a search counts as broad (1: every search walks). */
  searchBroadRows?: number
  /** argon2 cost (default TEST_ARGON2) and concurrency bounds (default TEST_HASHING_LIMITS). */
  argon2?: PasswordHasherOptions
  hashingLimits?: HashingLimits
  /** Per-address and server-wide login limits (default the production ones). */
  loginLimits?: LoginLimits
  /** How long a refused login is held (default 0 here, 1 s in production). */
  loginRefusalDelayMs?: number
  /** Which proxies' X-Forwarded-For to believe (default none). */
  trustProxy?: AppOptions['trustProxy']
  /** Browser origins allowed to call the API (default none: no CORS). */
  cors?: AppOptions['cors']
  /** SQLite only: busy_timeout (default the production 5 s). */
  sqliteBusyTimeoutMs?: number
  /** Deadlines of each request's database work (default the production ones). */
  deadlines?: AppOptions['deadlines']
  /** The free-space floor (default: none, writes never refused by it). */
  freeSpace?: FreeSpaceFloor
  /** Request metrics and `/metrics` (its meter goes to the services too); default none. */
  metrics?: AppOptions['metrics']
  /** Native TLS (a pair loaded with loadTlsMaterial); default plain HTTP. */
  tls?: AppOptions['tls']
  /** HSTS max-age (default the production one year). */
  hstsMaxAgeSeconds?: number
  /** Most users × groups the policy access query evaluates (default the production one). */
  policyAccessMaxPairs?: number
  /** Hooks a test adds to the app before it is ready (e.g. to read what a request recorded). */
  beforeReady?: (app: FastifyInstance) => void
  /** The console's build (default: dist/console as the server reads it; null: not built). */
  consoleAssets?: AppOptions['consoleAssets']
  /** COFFER_BACKUP_* as GET /v1/backups/status shows them. */
  backupSchedule?: AppOptions['backupSchedule']
}

/** A closed port: a test that forgets its stand-in fails fast and never reaches the real APIs. */
export const NO_PROVIDERS: ProviderConfig = {
  sendgridBaseUrl: 'http://127.0.0.1:9',
  twilioBaseUrl: 'http://127.0.0.1:9',
  timeoutMs: 2000,
}

export async function buildTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const store = await openTestStore({
    ...(options.sqliteFile ? { sqliteFile: options.sqliteFile } : {}),
    ...(options.sqliteBusyTimeoutMs !== undefined
      ? { sqliteBusyTimeoutMs: options.sqliteBusyTimeoutMs }
      : {}),
    ...(options.sqliteReadWorkers !== undefined
      ? { sqliteReadWorkers: options.sqliteReadWorkers }
      : {}),
    ...(options.sqliteReadWorkerUrl ? { sqliteReadWorkerUrl: options.sqliteReadWorkerUrl } : {}),
  })
  const blobDir = mkdtempSync(join(tmpdir(), 'coffer-blobs-'))
  const deps = createDeps(store, {
    masterKey: options.masterKey ?? MasterKey.generate(),
    blobStore: options.blobStore ?? new FsBlobStore(blobDir),
    argon2: options.argon2 ?? TEST_ARGON2,
    hashingLimits: options.hashingLimits ?? TEST_HASHING_LIMITS,
    ...(options.loginLimits ? { loginLimits: options.loginLimits } : {}),
    loginRefusalDelayMs: options.loginRefusalDelayMs ?? 0,
    ...(options.clock ? { clock: options.clock } : {}),
    providers: options.providers ?? NO_PROVIDERS,
    ...(options.onResetEmailError ? { onResetEmailError: options.onResetEmailError } : {}),
    ...(options.searchTimeoutMs ? { searchTimeoutMs: options.searchTimeoutMs } : {}),
    ...(options.searchLimits ? { searchLimits: options.searchLimits } : {}),
    ...(options.searchBroadRows ? { searchBroadRows: options.searchBroadRows } : {}),
    ...(options.metrics ? { meter: options.metrics.metrics.meter } : {}),
    ...(options.freeSpace ? { freeSpace: options.freeSpace } : {}),
    ...(options.policyAccessMaxPairs !== undefined
      ? { policyAccessMaxPairs: options.policyAccessMaxPairs }
      : {}),
  })
  const app = await buildApp(deps, {
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.trustProxy !== undefined ? { trustProxy: options.trustProxy } : {}),
    ...(options.cors ? { cors: options.cors } : {}),
    ...(options.deadlines ? { deadlines: options.deadlines } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.hstsMaxAgeSeconds !== undefined
      ? { hstsMaxAgeSeconds: options.hstsMaxAgeSeconds }
      : {}),
    ...(options.consoleAssets !== undefined ? { consoleAssets: options.consoleAssets } : {}),
    ...(options.backupSchedule ? { backupSchedule: options.backupSchedule } : {}),
  })
  const responses = watchResponses(app)
  options.beforeReady?.(app)
  await app.ready()
  const api = new Api(app, responses)
  const newAccount = async (): Promise<Admin> => {
    const creds = await deps.accounts.createWithAdmin()
    const me = await api.get('/v1/auth/me', { auth: creds.api_key })
    return { ...creds, userId: me.json().user.id }
  }
  const admin = await newAccount()
  return {
    app,
    deps,
    admin,
    api,
    responses,
    newAccount,
    close: async () => {
      await app.close()
      await store.close()
      rmSync(blobDir, { recursive: true, force: true })
      // Responses sent outside `api` (app.inject, a real socket) are checked here at the latest.
      assertDescribed(responses)
    },
  }
}

export interface CallOptions {
  /** API key or access token: sent as Basic `<credential>:`. */
  auth?: string
  /** SAT-style Basic pair. */
  basic?: { username: string; password: string }
  /** urlencoded form body. */
  form?: Record<string, string>
  /** multipart form body (as the official SDK sends v1 bodies). */
  multipart?: Record<string, string>
  json?: unknown
  query?: Record<string, string>
  headers?: Record<string, string>
}

export function basicHeader(user: string, password = ''): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`
}

export function multipartBody(fields: Record<string, string>): {
  body: string
  contentType: string
} {
  const boundary = `----coffer${Math.random().toString(16).slice(2)}`
  const parts = Object.entries(fields).map(
    ([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`,
  )
  return {
    body: `${parts.join('')}--${boundary}--\r\n`,
    contentType: `multipart/form-data; boundary=${boundary}`,
  }
}

/** Thin wrapper over `app.inject()` for the encodings real clients use. */
export class Api {
  constructor(
    readonly app: FastifyInstance,
    private readonly responses?: ResponseWatch,
  ) {}

  async call(
    method: InjectOptions['method'],
    url: string,
    o: CallOptions = {},
  ): Promise<LightMyRequestResponse> {
    const headers: Record<string, string> = { ...(o.headers ?? {}) }
    if (o.auth !== undefined) headers.authorization = basicHeader(o.auth)
    if (o.basic) headers.authorization = basicHeader(o.basic.username, o.basic.password)
    let payload: string | undefined
    if (o.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      payload = new URLSearchParams(o.form).toString()
    } else if (o.multipart) {
      const m = multipartBody(o.multipart)
      headers['content-type'] = m.contentType
      payload = m.body
    } else if (o.json !== undefined) {
      headers['content-type'] = 'application/json'
      payload = JSON.stringify(o.json)
    }
    const res = await this.app.inject({
      method,
      url,
      headers,
      ...(payload !== undefined ? { payload } : {}),
      ...(o.query ? { query: o.query } : {}),
    })
    if (this.responses) assertDescribed(this.responses)
    return res
  }
  get(url: string, o?: CallOptions) {
    return this.call('GET', url, o)
  }
  post(url: string, o?: CallOptions) {
    return this.call('POST', url, o)
  }
  put(url: string, o?: CallOptions) {
    return this.call('PUT', url, o)
  }
  delete(url: string, o?: CallOptions) {
    return this.call('DELETE', url, o)
  }
}

export const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64')
export const unb64 = (text: string) => JSON.parse(Buffer.from(text, 'base64').toString('utf8'))

/** Creates a user (optionally in new groups with these policies); returns its id and credentials. */
export async function createUser(
  t: TestApp,
  options: { username?: string; password?: string; policy?: PolicyStatement[]; auth?: string } = {},
) {
  const auth = options.auth ?? t.admin.api_key
  const username = options.username ?? `user-${Math.random().toString(36).slice(2)}`
  const form: Record<string, string> = { username }
  if (options.password) form.password = options.password
  if (options.policy) {
    const g = await t.api.post('/v1/groups', {
      auth,
      form: { name: `g-${username}`, policy: b64(options.policy) },
    })
    if (g.statusCode !== 200) throw new Error(`group create failed: ${g.body}`)
    form.group_ids = g.json().group.id
  }
  const res = await t.api.post('/v1/users', { auth, form })
  if (res.statusCode !== 200) throw new Error(`user create failed: ${res.body}`)
  const user = res.json().user
  return {
    id: user.id as string,
    username,
    apiKey: user.api_key as string,
    accessToken: user.access_token as string,
  }
}

/** Asserts the error envelope and returns its `error` object. */
export function errorOf(res: LightMyRequestResponse) {
  const body = res.json()
  if (body.result !== 'error' || typeof body.transaction_id !== 'string')
    throw new Error(`not an error envelope: ${res.body}`)
  return body.error as { message: string; type: string; code: string }
}
