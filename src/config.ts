import { isIP } from 'node:net'
import { join, resolve } from 'node:path'
import { parseAuditSink, type SinkTarget } from './audit/sink.js'
import { type BackupScheduleConfig, backupSettings } from './config-backup.js'
import {
  type BlobSettings,
  blobSettings,
  databaseUrl,
  type S3Config,
  s3DeadlineProblems,
} from './config-storage.js'
import { type TlsConfig, tlsSettings } from './config-tls.js'
import { defaultHashingLimits } from './crypto/passwords.js'
import { parseOriginList } from './lib/origins.js'

export type { BackupScheduleConfig, ScheduledTarget } from './config-backup.js'
export { clusterBlobProblems, type S3Config } from './config-storage.js'
export type { TlsConfig, TlsPairFiles } from './config-tls.js'

/**
 * Every setting, read once from the environment (the only reader of `process.env`), validated,
 * frozen and passed down. Names are fixed (operators' files depend on them); the README table lists
 * each one with its default.
 */
export interface Config {
  host: string
  port: number
  dataDir: string
  /** `postgres://…`, or a SQLite file path. */
  databaseUrl: string
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  /** Which reverse proxies' `X-Forwarded-For` to believe (see TrustProxy). */
  trustProxy: TrustProxy
  /** Largest request body outside BLOB uploads. */
  bodyLimitBytes: number
  env: 'development' | 'production'
  /**
   * COFFER_AUDIT: `on` (default) or `off`. Off exists for benchmarks only (audit on vs off) and
   * is UNSAFE: nothing is audited. Refused when COFFER_ENV=production.
   */
  audit: boolean
  /** COFFER_AUDIT_SINK: where stored events are also copied (audit/sink.ts); db is always on. */
  auditSink: SinkTarget[]
  /** COFFER_AUDIT_RETENTION_DAYS: days of audit events kept (whole UTC days); undefined: forever. */
  auditRetentionDays: number | undefined
  /** Base64 of the 32-byte master key, when given in the environment. */
  masterKey: string | undefined
  /** `coffer keys rotate` only: the key to rotate to (else one is generated into the key file). */
  newMasterKey: string | undefined
  /** Where the master key is read from (and, for a new embedded database, generated into). */
  masterKeyFile: string
  /** COFFER_MASTER_KEY_PREVIOUS: comma-separated base64 keys that only unwrap (key rotation). */
  masterKeyPrevious: string | undefined
  /**
   * COFFER_MASTER_KEY_PREVIOUS_FILE (default: the key file's path + `.previous`): more previous
   * keys; `coffer keys rotate` writes it on the embedded key file and removes it when done.
   */
  masterKeyPreviousFile: string
  blobStore: BlobSettings['blobStore']
  /** COFFER_BLOB_STORE was given (PostgreSQL asks for it: see clusterBlobProblems). */
  blobStoreExplicit: boolean
  /** Folder of the filesystem blob store (COFFER_BLOB_DIR). */
  blobDir: string
  /** The operator declares `blobDir` shared by every node (COFFER_BLOB_DIR_SHARED). */
  blobDirShared: boolean
  s3: S3Config | undefined
  /** Bound on the start-up check that the BLOB store answers, in milliseconds. */
  blobCheckTimeoutMs: number
  /** Where messages go (SendGrid, Twilio): operator configuration, never caller-supplied. */
  providers: ProviderConfig
  /** Life of the single-use credential a password reset email carries. */
  passwordResetTtlMinutes: number
  /** Longest life an access token may be given (login, user routes), in days. */
  accessTokenMaxDays: number
  /** The consent API's listener (default port 8081); its address defaults to `host`. */
  consentPort: number
  consentHost: string
  /** Which listeners `coffer serve` runs: both (default), only the main API, or only consent. */
  serve: ServeMode
  /** App Proxy shared secret: storefront signatures are checked with it in production. */
  storefrontSecret: string | undefined
  /** How far a storefront request's `timestamp` may be from now, either way, in seconds. */
  storefrontMaxSkewSeconds: number
  /** The consent secret (HS256 key of consent tokens), when given in the environment. */
  consentJwtSecret: string | undefined
  /** Where the consent secret is read from (and, for an embedded database, generated into). */
  consentJwtSecretFile: string
  /** PostgreSQL: the bound on each search statement (statement_timeout), in milliseconds. */
  searchTimeoutMs: number
  /** Where searches run and how many at once (issue 14). */
  search: SearchRunConfig
  /** Consent API flood limits (requests per window, per client address and per shop; in memory, per node). */
  consentRateLimit: ConsentRateLimitConfig
  /** Days a consent record nobody ever chose for may stay untouched before it is removed. */
  consentUnchosenTtlDays: number
  /** How often the consent listener removes such records, in seconds. */
  consentPruneIntervalSeconds: number
  /** Login limits beyond the fixed per-user ones (modules/auth/login-throttle.ts). */
  login: LoginLimitsConfig
  /** Bounds on concurrent argon2 work (crypto/passwords.ts). */
  argon2: Argon2Config
  /** Notes about settings logged once at start (e.g. a value whose meaning changed). */
  startupNotes: readonly string[]
  /** Browser origins allowed to call each listener (CORS); none by default. */
  cors: CorsConfig
  /** PostgreSQL pool and timeouts, SQLite's lock wait, request deadlines (issue 12). */
  database: DatabaseLimitsConfig
  /** Health probes, metrics and shutdown (issue 12): see OperationsConfig. */
  operations: OperationsConfig
  /** TLS on both listeners, HSTS, client certificates (issue 19): see config-tls.ts. */
  tls: TlsConfig
  /** Scheduled backups (issue 22): see config-backup.ts. */
  backup: BackupScheduleConfig
}

/** CORS (issue 11): which web pages may read the answers of each listener. */
export interface CorsConfig {
  /** Main API: exact origins (`https://app.example.com`); empty: no CORS headers at all. */
  origins: readonly string[]
  /** Consent API: exact origins or `https://*.domain` patterns; empty: none (App Proxy: same origin). */
  consentOrigins: readonly string[]
  /** Access-Control-Max-Age of preflight answers on both listeners. */
  maxAgeSeconds: number
}

/** All durations in milliseconds. */
export interface DatabaseLimitsConfig {
  /** PostgreSQL: connections per process (each node has its own pool). */
  pgPoolSize: number
  /** PostgreSQL: longest wait for a new connection (a request then answers 503). */
  pgConnectTimeoutMs: number
  /** PostgreSQL statement_timeout on every connection; 0: none. At least the search bound. */
  pgStatementTimeoutMs: number
  /** PostgreSQL: an idle pooled connection is closed after this; 0: kept. */
  pgIdleTimeoutMs: number
  /** SQLite busy_timeout: how long a statement waits for another process's write lock. */
  sqliteBusyTimeoutMs: number
  /** Deadline of a request's database work, from its arrival (503 and rollback past it). */
  requestTimeoutMs: number
  /** The same for requests that upload a BLOB (the body may take long on a slow link). */
  blobUploadTimeoutMs: number
}

// --- Operations: health, metrics, graceful shutdown (issue 12) ---

export interface OperationsConfig {
  /** Bound on each readiness check of `GET /readyz` (database, migrations, BLOB store), in ms. */
  readyTimeoutMs: number
  /** After SIGTERM/SIGINT, how long in-flight requests may take before the process gives up, in ms. */
  shutdownGraceMs: number
  /**
   * After SIGTERM/SIGINT, how long the node keeps accepting (while `/readyz` answers 503) so a
   * load balancer notices before the listeners close, in ms; added before the grace period.
   */
  shutdownDelayMs: number
  metrics: MetricsConfig
  /**
   * Bytes that must stay free on the file systems of the SQLite file and the BLOB folder, or
   * writes are refused 507 (storage/free-space-floor.ts); undefined: min(1 GiB, 5 % of each
   * file system's size); 0: no floor.
   */
  minFreeBytes: number | undefined
}

/**
 * `GET /metrics` is off unless a port or a token is given. With a port it is served there (on
 * `host`, loopback by default), and only there; with a token (at least 32 characters) every
 * `/metrics` asks `Authorization: Bearer <token>`, and without a port it is served on the API
 * listeners too.
 */
export interface MetricsConfig {
  port: number | undefined
  host: string
  token: string | undefined
}

/** A metrics token shorter than this could be guessed; longer than the max is a mistake. */
export const METRICS_TOKEN_MIN_LENGTH = 32
export const METRICS_TOKEN_MAX_LENGTH = 1024

function operations(env: NodeJS.ProcessEnv, problems: string[]): OperationsConfig {
  const token = env.COFFER_METRICS_TOKEN || undefined
  if (
    token !== undefined &&
    (token.length < METRICS_TOKEN_MIN_LENGTH ||
      token.length > METRICS_TOKEN_MAX_LENGTH ||
      !/^[\x21-\x7e]+$/.test(token))
  ) {
    problems.push(
      `COFFER_METRICS_TOKEN must be ${METRICS_TOKEN_MIN_LENGTH} to ${METRICS_TOKEN_MAX_LENGTH} printable ASCII characters without spaces`,
    )
  }
  const rawPort = env.COFFER_METRICS_PORT
  return {
    readyTimeoutMs: intSetting(env, 'COFFER_READY_TIMEOUT_MS', 2000, 100, 60_000, problems),
    shutdownGraceMs: intSetting(env, 'COFFER_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000, problems),
    // 0: nothing to wait for without a balancer (and Ctrl-C stays prompt); a minute is more than
    // any balancer's probe interval times its failure count.
    shutdownDelayMs: intSetting(env, 'COFFER_SHUTDOWN_DELAY_MS', 0, 0, 60_000, problems),
    minFreeBytes: env.COFFER_MIN_FREE_BYTES?.trim()
      ? intSetting(env, 'COFFER_MIN_FREE_BYTES', 0, 0, Number.MAX_SAFE_INTEGER, problems)
      : undefined,
    metrics: {
      port: rawPort ? port('COFFER_METRICS_PORT', rawPort, 0, problems) : undefined,
      host: listenHost('COFFER_METRICS_HOST', env.COFFER_METRICS_HOST, '127.0.0.1', problems),
      token,
    },
  }
}

export interface ConsentRateLimitConfig {
  perAddress: number
  perShop: number
  windowSeconds: number
}

/**
 * `false`: the socket's address is the client (X-Forwarded-For ignored). A number n: the nearest
 * n hops are trusted proxies, so the client is the address the farthest of them saw (the n-th
 * entry of X-Forwarded-For from the right). A list: addresses/CIDRs (or `loopback`, `linklocal`,
 * `uniquelocal`) of trusted proxies; the client is the nearest address not in the list. Entries a
 * client writes itself are never believed beyond what a trusted proxy appended.
 */
export type TrustProxy = false | number | readonly string[]

export interface LoginLimitsConfig {
  /** Failures per client address (IPv6: per /64), any account or username. */
  perAddressMax: number
  perAddressWindowSeconds: number
  /** Failures of every login on the server together. */
  globalMax: number
  globalWindowSeconds: number
  /** How long a refused login (429, or 503 when hashing is saturated) is held before answering. */
  refusalDelayMs: number
  /**
   * How long a login waits when a window is spent only by attempts still in flight (their
   * passwords being checked, maybe right) before answering 503 (issue 12, point 9).
   */
  inFlightWaitMs: number
}

export interface Argon2Config {
  /** Hashes running at once; must leave libuv threads for file I/O (below UV_THREADPOOL_SIZE). */
  maxConcurrent: number
  /** Hashes waiting; beyond that a request is answered 503 with Retry-After. */
  maxQueued: number
}

export type ServeMode = 'both' | 'api' | 'consent'
export const SERVE_MODES: readonly ServeMode[] = ['both', 'api', 'consent']

export interface ProviderConfig {
  /** Base URL of SendGrid's v3 API, without a trailing slash. */
  sendgridBaseUrl: string
  /** Base URL of Twilio's REST API, without a trailing slash. */
  twilioBaseUrl: string
  /** Bound on each provider call, connect to last byte. */
  timeoutMs: number
}

export const DEFAULT_PROVIDERS: ProviderConfig = Object.freeze({
  sendgridBaseUrl: 'https://api.sendgrid.com',
  twilioBaseUrl: 'https://api.twilio.com',
  timeoutMs: 10_000,
})

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`)
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const

function port(name: string, raw: string | undefined, fallback: number, problems: string[]): number {
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0 || n > 65_535) problems.push(`${name} must be a port number`)
  return n
}

/** One DNS label: letters, digits, `-` and `_` (container names), not starting or ending in `-`. */
const HOST_LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/

/**
 * An address to listen on: an IPv4 or IPv6 address (without brackets) or a host name. Whether
 * the name resolves and the port is free is checked at start, before anything is written.
 */
function listenHost(
  name: string,
  raw: string | undefined,
  fallback: string,
  problems: string[],
): string {
  const value = raw?.trim() || fallback
  if (isIP(value) !== 0) return value
  const labels = value.replace(/\.$/, '').split('.')
  if (value.length <= 253 && labels.every((l) => HOST_LABEL.test(l)) && !/^[\d.]+$/.test(value))
    return value
  const hint = /^\[.*\]$/.test(value) ? ' (write an IPv6 address without brackets)' : ''
  problems.push(`${name} must be an IP address or a host name, not ${JSON.stringify(value)}${hint}`)
  return value
}

function flag(name: string, raw: string | undefined, problems: string[]): boolean {
  if (raw === undefined || raw === '') return false
  if (['1', 'true', 'yes'].includes(raw.toLowerCase())) return true
  if (['0', 'false', 'no'].includes(raw.toLowerCase())) return false
  problems.push(`${name} must be true or false`)
  return false
}

/** An http(s) base URL without credentials, query or fragment; the trailing slash is dropped. */
function baseUrl(
  name: string,
  raw: string | undefined,
  fallback: string,
  problems: string[],
): string {
  if (raw === undefined || raw === '') return fallback
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    problems.push(`${name} must be an http(s) URL`)
    return fallback
  }
  if (
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.username ||
    url.password ||
    url.search ||
    url.hash
  ) {
    problems.push(`${name} must be an http(s) URL without credentials, query or fragment`)
  }
  return url.href.replace(/\/+$/, '')
}

function providers(env: NodeJS.ProcessEnv, problems: string[]): ProviderConfig {
  const sendgridBaseUrl = baseUrl(
    'COFFER_SENDGRID_BASE_URL',
    env.COFFER_SENDGRID_BASE_URL,
    DEFAULT_PROVIDERS.sendgridBaseUrl,
    problems,
  )
  const twilioBaseUrl = baseUrl(
    'COFFER_TWILIO_BASE_URL',
    env.COFFER_TWILIO_BASE_URL,
    DEFAULT_PROVIDERS.twilioBaseUrl,
    problems,
  )
  const timeoutMs = Number(env.COFFER_PROVIDER_TIMEOUT_MS || DEFAULT_PROVIDERS.timeoutMs)
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 120_000) {
    problems.push('COFFER_PROVIDER_TIMEOUT_MS must be an integer from 1 to 120000')
  }
  return { sendgridBaseUrl, twilioBaseUrl, timeoutMs }
}

// --- Login flood protection and proxy trust (security review, findings 3 and 12) ---

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal']
/** More hops than any real chain of proxies: a larger number is a typo. */
const MAX_PROXY_HOPS = 16

function isAddressOrCidr(entry: string): boolean {
  if (PROXY_NAMES.includes(entry)) return true
  const [address = '', prefix, extra] = entry.split('/')
  const version = isIP(address)
  if (version === 0 || extra !== undefined) return false
  if (prefix === undefined) return true
  const bits = Number(prefix)
  return /^\d+$/.test(prefix) && bits <= (version === 4 ? 32 : 128)
}

function trustProxy(raw: string | undefined, problems: string[], notes: string[]): TrustProxy {
  const value = (raw ?? '').trim()
  if (['', '0', 'false', 'no'].includes(value.toLowerCase())) return false
  if (['true', 'yes'].includes(value.toLowerCase())) {
    notes.push(
      'COFFER_TRUST_PROXY=true now means 1 hop: the client is the address the nearest proxy saw, never what the client wrote in X-Forwarded-For; set a hop count or proxy addresses to be explicit',
    )
    return 1
  }
  if (/^\d+$/.test(value)) {
    const hops = Number(value)
    if (hops > MAX_PROXY_HOPS)
      problems.push(`COFFER_TRUST_PROXY hops must be at most ${MAX_PROXY_HOPS}`)
    return hops
  }
  const entries = value.split(',').map((e) => e.trim())
  const bad = entries.filter((e) => !isAddressOrCidr(e))
  if (bad.length > 0) {
    problems.push(
      'COFFER_TRUST_PROXY must be false, true, a hop count, or comma-separated proxy addresses/CIDRs',
    )
  }
  return Object.freeze(entries)
}

// --- CORS (issue 11) ---

function corsSettings(env: NodeJS.ProcessEnv, problems: string[]): CorsConfig {
  return Object.freeze({
    origins: parseOriginList(
      'COFFER_CORS_ORIGINS',
      env.COFFER_CORS_ORIGINS,
      { wildcardSubdomains: false },
      problems,
    ),
    consentOrigins: parseOriginList(
      'COFFER_CONSENT_CORS_ORIGINS',
      env.COFFER_CONSENT_CORS_ORIGINS,
      { wildcardSubdomains: true },
      problems,
    ),
    // 7,200 s is the most Chromium honours (Firefox: 86,400); 0 asks for a preflight every time.
    maxAgeSeconds: intSetting(env, 'COFFER_CORS_MAX_AGE_SECONDS', 7200, 0, 86_400, problems),
  })
}

function intSetting(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  max: number,
  problems: string[],
): number {
  const raw = env[name]
  const n = raw === undefined || raw.trim() === '' ? fallback : Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    problems.push(`${name} must be an integer from ${min} to ${max}`)
  }
  return n
}

function loginLimits(env: NodeJS.ProcessEnv, problems: string[]): LoginLimitsConfig {
  const day = 86_400
  return Object.freeze({
    perAddressMax: intSetting(env, 'COFFER_LOGIN_ADDRESS_MAX_FAILURES', 50, 1, 1_000_000, problems),
    perAddressWindowSeconds: intSetting(
      env,
      'COFFER_LOGIN_ADDRESS_WINDOW_SECONDS',
      900,
      1,
      day,
      problems,
    ),
    globalMax: intSetting(env, 'COFFER_LOGIN_GLOBAL_MAX_FAILURES', 600, 1, 1_000_000, problems),
    globalWindowSeconds: intSetting(
      env,
      'COFFER_LOGIN_GLOBAL_WINDOW_SECONDS',
      60,
      1,
      day,
      problems,
    ),
    refusalDelayMs: intSetting(env, 'COFFER_LOGIN_REFUSAL_DELAY_MS', 1000, 0, 10_000, problems),
    inFlightWaitMs: intSetting(env, 'COFFER_LOGIN_IN_FLIGHT_WAIT_MS', 5000, 0, 60_000, problems),
  })
}

/**
 * argon2 runs on libuv's thread pool (UV_THREADPOOL_SIZE, default 4), shared with file I/O: by
 * default half the pool and half the CPUs may hash (crypto/passwords.ts), never the whole pool.
 */
function argon2Limits(env: NodeJS.ProcessEnv, problems: string[]): Argon2Config {
  const pool = intSetting(env, 'UV_THREADPOOL_SIZE', 4, 2, 1024, problems)
  const defaults = defaultHashingLimits(Math.max(2, pool))
  const maxConcurrent = intSetting(
    env,
    'COFFER_ARGON2_MAX_CONCURRENT',
    defaults.maxConcurrent,
    1,
    Math.max(1, pool - 1),
    problems,
  )
  const maxQueued = intSetting(
    env,
    'COFFER_ARGON2_MAX_QUEUED',
    defaults.maxQueued,
    0,
    10_000,
    problems,
  )
  return Object.freeze({ maxConcurrent, maxQueued })
}

// --- end of login flood protection and proxy trust ---

// --- Search execution: worker threads, concurrency, queue (issue 14) ---

export interface SearchRunConfig {
  /** SQLite file: worker threads with read-only connections that run searches (0: inline). */
  workers: number
  /** PostgreSQL: searches running at once per node, below COFFER_PG_POOL_SIZE. */
  pgConcurrency: number
  /** Searches waiting for a worker or slot; one more is answered 503 SEARCH_BUSY. */
  queue: number
}

function searchRun(
  env: NodeJS.ProcessEnv,
  pgPoolSize: number,
  problems: string[],
): SearchRunConfig {
  const workers = intSetting(env, 'COFFER_SEARCH_WORKERS', 2, 0, 64, problems)
  // Half the pool by default: searches never hold every connection other requests need.
  const fallback = Math.max(1, Math.floor(pgPoolSize / 2))
  const pgConcurrency = intSetting(env, 'COFFER_SEARCH_CONCURRENCY', fallback, 1, 1000, problems)
  if (pgPoolSize > 1 && pgConcurrency >= pgPoolSize) {
    problems.push('COFFER_SEARCH_CONCURRENCY must be below COFFER_PG_POOL_SIZE')
  }
  const queue = intSetting(env, 'COFFER_SEARCH_QUEUE', 32, 0, 10_000, problems)
  return Object.freeze({ workers, pgConcurrency, queue })
}

// --- end of search execution ---

// --- Database pool, timeouts and request deadlines (issue 12) ---

function databaseLimits(
  env: NodeJS.ProcessEnv,
  searchTimeoutMs: number,
  problems: string[],
): DatabaseLimitsConfig {
  const hour = 3_600_000
  const limits: DatabaseLimitsConfig = {
    pgPoolSize: intSetting(env, 'COFFER_PG_POOL_SIZE', 10, 1, 1000, problems),
    pgConnectTimeoutMs: intSetting(
      env,
      'COFFER_PG_CONNECT_TIMEOUT_MS',
      5000,
      100,
      120_000,
      problems,
    ),
    pgStatementTimeoutMs: intSetting(
      env,
      'COFFER_PG_STATEMENT_TIMEOUT_MS',
      30_000,
      0,
      hour,
      problems,
    ),
    pgIdleTimeoutMs: intSetting(env, 'COFFER_PG_IDLE_TIMEOUT_MS', 30_000, 0, 24 * hour, problems),
    sqliteBusyTimeoutMs: intSetting(
      env,
      'COFFER_SQLITE_BUSY_TIMEOUT_MS',
      5000,
      0,
      60_000,
      problems,
    ),
    requestTimeoutMs: intSetting(env, 'COFFER_REQUEST_TIMEOUT_MS', 30_000, 100, hour, problems),
    blobUploadTimeoutMs: intSetting(
      env,
      'COFFER_BLOB_UPLOAD_TIMEOUT_MS',
      600_000,
      1000,
      24 * hour,
      problems,
    ),
  }
  // The search bound is the tighter one for searches; a larger one would never apply.
  if (limits.pgStatementTimeoutMs > 0 && searchTimeoutMs > limits.pgStatementTimeoutMs) {
    problems.push('COFFER_SEARCH_TIMEOUT_MS must not exceed COFFER_PG_STATEMENT_TIMEOUT_MS')
  }
  if (limits.blobUploadTimeoutMs < limits.requestTimeoutMs) {
    problems.push('COFFER_BLOB_UPLOAD_TIMEOUT_MS must be at least COFFER_REQUEST_TIMEOUT_MS')
  }
  return Object.freeze(limits)
}

// --- end of database pool, timeouts and request deadlines ---

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = []
  const notes: string[] = []
  const dataDir = resolve(env.COFFER_DATA_DIR || './data')
  const dbUrl = databaseUrl(env.COFFER_DATABASE_URL, dataDir, problems)
  const logLevel = (env.COFFER_LOG_LEVEL || 'info') as Config['logLevel']
  if (!LOG_LEVELS.includes(logLevel)) {
    problems.push(`COFFER_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`)
  }
  const appEnv = env.COFFER_ENV || 'development'
  if (appEnv !== 'development' && appEnv !== 'production') {
    problems.push('COFFER_ENV must be development or production')
  }
  const bodyLimit = Number(env.COFFER_BODY_LIMIT_BYTES || 1_048_576)
  if (!Number.isInteger(bodyLimit) || bodyLimit < 1024) {
    problems.push('COFFER_BODY_LIMIT_BYTES must be an integer of at least 1024')
  }
  const masterKey = env.COFFER_MASTER_KEY || undefined
  if (masterKey !== undefined && !/^[A-Za-z0-9+/]{43}=?$/.test(masterKey.trim())) {
    problems.push('COFFER_MASTER_KEY must be the base64 of exactly 32 bytes')
  }
  const masterKeyPrevious = env.COFFER_MASTER_KEY_PREVIOUS || undefined
  if (
    masterKeyPrevious !== undefined &&
    !masterKeyPrevious.split(',').every((part) => /^[A-Za-z0-9+/]{43}=?$/.test(part.trim()))
  ) {
    problems.push(
      'COFFER_MASTER_KEY_PREVIOUS must be comma-separated base64 keys of exactly 32 bytes each',
    )
  }
  const newMasterKey = env.COFFER_NEW_MASTER_KEY || undefined
  if (newMasterKey !== undefined && !/^[A-Za-z0-9+/]{43}=?$/.test(newMasterKey.trim())) {
    problems.push('COFFER_NEW_MASTER_KEY must be the base64 of exactly 32 bytes')
  }
  const blobs = blobSettings(
    env,
    dataDir,
    {
      flag,
      url: baseUrl,
      int: (name, fallback, min, max) => intSetting(env, name, fallback, min, max, problems),
    },
    problems,
  )
  const resetTtl = Number(env.COFFER_PASSWORD_RESET_TTL_MINUTES || 30)
  if (!Number.isInteger(resetTtl) || resetTtl < 1 || resetTtl > 1440) {
    problems.push('COFFER_PASSWORD_RESET_TTL_MINUTES must be an integer from 1 to 1440')
  }
  const tokenMaxDays = Number(env.COFFER_ACCESS_TOKEN_MAX_DAYS || 30)
  if (!Number.isInteger(tokenMaxDays) || tokenMaxDays < 1 || tokenMaxDays > 3650) {
    problems.push('COFFER_ACCESS_TOKEN_MAX_DAYS must be an integer from 1 to 3650')
  }
  const auditSetting = env.COFFER_AUDIT || 'on'
  if (auditSetting !== 'on' && auditSetting !== 'off')
    problems.push('COFFER_AUDIT must be on or off')
  else if (auditSetting === 'off' && appEnv === 'production')
    problems.push(
      'COFFER_AUDIT=off is for benchmarks only and is refused when COFFER_ENV=production',
    )
  const auditSink = parseAuditSink(env.COFFER_AUDIT_SINK)
  if (typeof auditSink === 'string') problems.push(auditSink)
  const retentionRaw = env.COFFER_AUDIT_RETENTION_DAYS?.trim()
  const auditRetentionDays = retentionRaw ? Number(retentionRaw) : undefined
  if (
    auditRetentionDays !== undefined &&
    (!Number.isInteger(auditRetentionDays) || auditRetentionDays < 1 || auditRetentionDays > 36_500)
  ) {
    problems.push(
      'COFFER_AUDIT_RETENTION_DAYS must be an integer from 1 to 36500 (unset: keep forever)',
    )
  }
  const serve = (env.COFFER_SERVE || 'both') as ServeMode
  if (!SERVE_MODES.includes(serve)) problems.push('COFFER_SERVE must be both, api or consent')
  const consentJwtSecret = env.COFFER_CONSENT_JWT_SECRET || undefined
  if (consentJwtSecret !== undefined && consentJwtSecret.length < 32) {
    problems.push('COFFER_CONSENT_JWT_SECRET must be at least 32 characters')
  }
  const skew = Number(env.COFFER_STOREFRONT_MAX_SKEW_SECONDS || 90)
  if (!Number.isInteger(skew) || skew < 1 || skew > 86_400) {
    problems.push('COFFER_STOREFRONT_MAX_SKEW_SECONDS must be an integer from 1 to 86400')
  }
  // Search (security review, finding 2): a stopped statement is answered 503.
  const searchTimeoutMs = intSetting(env, 'COFFER_SEARCH_TIMEOUT_MS', 5000, 100, 600_000, problems)
  const consentLimit = (name: string, fallback: number, max: number) =>
    intSetting(env, name, fallback, 1, max, problems)
  const consentRateLimit: ConsentRateLimitConfig = {
    perAddress: consentLimit('COFFER_CONSENT_RATE_LIMIT_PER_ADDRESS', 120, 1_000_000),
    perShop: consentLimit('COFFER_CONSENT_RATE_LIMIT_PER_SHOP', 6000, 1_000_000),
    windowSeconds: consentLimit('COFFER_CONSENT_RATE_LIMIT_WINDOW_SECONDS', 60, 86_400),
  }
  const consentUnchosenTtlDays = consentLimit('COFFER_CONSENT_UNCHOSEN_TTL_DAYS', 30, 3650)
  const consentPruneIntervalSeconds = consentLimit(
    'COFFER_CONSENT_PRUNE_INTERVAL_SECONDS',
    3600,
    86_400,
  )
  const host = listenHost('COFFER_HOST', env.COFFER_HOST, '127.0.0.1', problems)
  const database = databaseLimits(env, searchTimeoutMs, problems)
  const trust = trustProxy(env.COFFER_TRUST_PROXY, problems, notes)
  const masterKeyFile = resolve(env.COFFER_MASTER_KEY_FILE || join(dataDir, 'master.key'))
  const config: Config = {
    host,
    port: port('COFFER_PORT', env.COFFER_PORT, 8080, problems),
    dataDir,
    databaseUrl: dbUrl,
    logLevel,
    trustProxy: trust,
    bodyLimitBytes: bodyLimit,
    env: appEnv as Config['env'],
    masterKey,
    newMasterKey,
    masterKeyFile,
    masterKeyPrevious,
    masterKeyPreviousFile: resolve(
      env.COFFER_MASTER_KEY_PREVIOUS_FILE || `${masterKeyFile}.previous`,
    ),
    ...blobs,
    providers: providers(env, problems),
    passwordResetTtlMinutes: resetTtl,
    accessTokenMaxDays: tokenMaxDays,
    consentPort: port('COFFER_CONSENT_PORT', env.COFFER_CONSENT_PORT, 8081, problems),
    // Without a setting of its own, the main API's address (already checked, named as its own).
    consentHost: env.COFFER_CONSENT_HOST?.trim()
      ? listenHost('COFFER_CONSENT_HOST', env.COFFER_CONSENT_HOST, '', problems)
      : host,
    serve,
    audit: auditSetting !== 'off',
    auditSink: typeof auditSink === 'string' ? [] : auditSink,
    auditRetentionDays,
    storefrontSecret: env.COFFER_STOREFRONT_SECRET || undefined,
    storefrontMaxSkewSeconds: skew,
    consentJwtSecret,
    consentJwtSecretFile: resolve(
      env.COFFER_CONSENT_JWT_SECRET_FILE || join(dataDir, 'consent-jwt.key'),
    ),
    searchTimeoutMs,
    consentRateLimit,
    consentUnchosenTtlDays,
    consentPruneIntervalSeconds,
    login: loginLimits(env, problems),
    argon2: argon2Limits(env, problems),
    startupNotes: Object.freeze(notes),
    cors: corsSettings(env, problems),
    database,
    search: searchRun(env, database.pgPoolSize, problems),
    operations: operations(env, problems),
    tls: tlsSettings(
      env,
      {
        flag,
        int: (name, fallback, min, max) => intSetting(env, name, fallback, min, max, problems),
      },
      trust !== false,
      problems,
    ),
    backup: backupSettings(
      env,
      { int: (name, fallback, min, max) => intSetting(env, name, fallback, min, max, problems) },
      { s3Configured: blobs.s3 !== undefined, databaseUrl: dbUrl },
      problems,
    ),
  }
  problems.push(...s3DeadlineProblems(config.s3, config.database.blobUploadTimeoutMs))
  if (problems.length > 0) throw new ConfigError(problems)
  return Object.freeze(config)
}
