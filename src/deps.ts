import { AuditWriter } from './audit/writer.js'
import type { BlobStore } from './blob/blob-store.js'
import { FsBlobStore } from './blob/fs-blob-store.js'
import { type Config, DEFAULT_PROVIDERS, type ProviderConfig } from './config.js'
import { Keyring } from './crypto/keyring.js'
import type { MasterKey } from './crypto/master-key.js'
import type { MasterKeySet } from './crypto/master-key-set.js'
import {
  type HashingLimits,
  PasswordHasher,
  type PasswordHasherOptions,
} from './crypto/passwords.js'
import { randomSecret } from './crypto/secrets.js'
import { Indexer } from './indexing/indexer.js'
import { type Clock, systemClock } from './lib/clock.js'
import { type Meter, noopMeter } from './metrics/meter.js'
import { AccountsService } from './modules/accounts/accounts.service.js'
import { AuditService } from './modules/audit/audit.service.js'
import { AuthzService } from './modules/auth/authz.service.js'
import { CredentialsService } from './modules/auth/credentials.service.js'
import { LoginService } from './modules/auth/login.service.js'
import { type LoginLimits, LoginThrottle } from './modules/auth/login-throttle.js'
import { BlobsService } from './modules/blobs/blobs.service.js'
import { type ConsentOptions, ConsentService } from './modules/consent/consent.service.js'
import { ConsentKeys } from './modules/consent/consent-keys.js'
import { ConsentTokens } from './modules/consent/token.js'
import { DocumentsService } from './modules/documents/documents.service.js'
import { GroupsService } from './modules/groups/groups.service.js'
import { HealthService } from './modules/health/health.service.js'
import { MessagingService, SendGridClient, TwilioClient } from './modules/messaging/index.js'
import { MessageRateLimit } from './modules/messaging/message-rate-limit.js'
import { MeteringService } from './modules/metering/metering.service.js'
import { MfaService } from './modules/mfa/mfa.service.js'
import { PasswordResetFlowsService } from './modules/password-reset/flows.service.js'
import { PolicySimulatorService } from './modules/policy-simulator/simulator.service.js'
import { SatsService } from './modules/sats/sats.service.js'
import { SchemasService } from './modules/schemas/schemas.service.js'
import { UserSchemaService } from './modules/schemas/user-schema.service.js'
import { SearchService } from './modules/search/search.service.js'
import { SettingsService } from './modules/settings/settings.service.js'
import { UsersService } from './modules/users/users.service.js'
import { VaultsService } from './modules/vaults/vaults.service.js'
import { FreeSpaceFloor } from './storage/free-space-floor.js'
import { BoundedReads } from './store/bounded-reads.js'
import { dataKeyStore } from './store/data-keys.repo.js'
import type { Store } from './store/db.js'

export interface Deps {
  store: Store
  /** Refuses writes while free space is under COFFER_MIN_FREE_BYTES (http/free-space-guard.ts). */
  freeSpace: FreeSpaceFloor
  clock: Clock
  keyring: Keyring
  blobs: BlobStore
  hasher: PasswordHasher
  credentials: CredentialsService
  sats: SatsService
  authz: AuthzService
  groups: GroupsService
  users: UsersService
  login: LoginService
  accounts: AccountsService
  vaults: VaultsService
  documents: DocumentsService
  search: SearchService
  /** Where searches run and how many at once (tests read its load). */
  searchReads: BoundedReads
  blobService: BlobsService
  schemas: SchemasService
  userSchemas: UserSchemaService
  sendgrid: SendGridClient
  twilio: TwilioClient
  messaging: MessagingService
  passwordResets: PasswordResetFlowsService
  mfa: MfaService
  consent: ConsentService
  health: HealthService
  settings: SettingsService
  /** Operations metering (issue 13, part 3): counts, usage, the daily quota. */
  metering: MeteringService
  /** The audit trail's group commit; null only when COFFER_AUDIT=off (benchmarks, never production). */
  audit: AuditWriter | null
  /** Reads of the trail (`GET /v1/audit_events`). */
  auditEvents: AuditService
  /** The policy simulator (`/v1/policy/explain`, `/v1/policy/access`). */
  policySimulator: PolicySimulatorService
  /** Where services count and time what metrics show. */
  meter: Meter
}

export interface DepsOptions {
  /** The key that unlocks this database's data keys (see modules/keys/master-key-source.ts). */
  masterKey: MasterKey | MasterKeySet
  blobStore: BlobStore
  clock?: Clock
  /** Told when a garbage BLOB object could not be deleted (it is left behind, not lost data). */
  onCleanupError?: (error: unknown, objectKey: string) => void
  /** Told when a batch of operation counts could not be stored (kept, tried again). */
  onMeteringFlushError?: (error: unknown) => void
  /** Tests use cheaper argon2 parameters; production keeps the OWASP ones. */
  argon2?: PasswordHasherOptions
  /** Concurrent and queued argon2 work (default 2 running, 32 waiting). */
  hashingLimits?: HashingLimits
  /** Per-address and server-wide login failure limits (default DEFAULT_LOGIN_LIMITS). */
  loginLimits?: LoginLimits
  /** How long a refused login (429/503) is held before its answer (default 1000 ms). */
  loginRefusalDelayMs?: number
  /** Provider base URLs and timeout (tests point them at a local stand-in). */
  providers?: ProviderConfig
  /** Life of a password reset email's credential (default 30 minutes). */
  passwordResetTtlMinutes?: number
  /** Longest life an access token may be given, in days (default 30). */
  accessTokenMaxDays?: number
  /** PostgreSQL bound on each search statement (default 5 s; COFFER_SEARCH_TIMEOUT_MS). */
  searchTimeoutMs?: number
  /**
   * Searches at once (PostgreSQL; SQLite with a read pool: its threads; inline: 1) and waiting
   * beyond them (default defaultSearchLimits; COFFER_SEARCH_CONCURRENCY, COFFER_SEARCH_QUEUE).
   */
  searchLimits?: Partial<SearchLimits>
  /** Tests only: the candidate-set size from which a search counts as broad (search.repo.ts). */
  searchBroadRows?: number
  /** Told (never with secrets) when a reset email could not be sent; its caller never is. */
  onResetEmailError?: (error: unknown, context: { flowId: string }) => void
  /**
   * The consent API's secret and storefront settings (modules/consent/consent-secret.ts).
   * Without them (tests of the main API, `coffer serve` running only the main API) the consent
   * service gets a throwaway secret and is never served.
   */
  consent?: ConsentOptions & { secret: string }
  /** Where services count and time what metrics show (default: nowhere; metrics/meter.ts). */
  meter?: Meter
  /** Bound on each readiness check of `GET /readyz` (default 2 s; COFFER_READY_TIMEOUT_MS). */
  readyTimeoutMs?: number
  /** The free-space floor of the data folders (default: none, writes never refused by it). */
  freeSpace?: FreeSpaceFloor
  /** False: no audit trail (COFFER_AUDIT=off, benchmarks only; refused in production). */
  audit?: boolean
  /** Most users × groups the policy access query evaluates (default DEFAULT_ACCESS_MAX_PAIRS). */
  policyAccessMaxPairs?: number
}

/** The blob store the configuration names. */
/**
 * The configured BLOB store. The S3 one (and the AWS SDK under it, megabytes of code) is loaded
 * only when it is the one configured: a node on the file store never carries it in memory.
 */
export async function blobStoreFor(config: Config): Promise<BlobStore> {
  const s3 = config.s3
  if (config.blobStore === 's3' && s3) {
    const { S3BlobStore } = await import('./blob/s3-blob-store.js')
    return new S3BlobStore({
      region: s3.region,
      bucket: s3.bucket,
      forcePathStyle: s3.forcePathStyle,
      prefix: s3.prefix,
      timeouts: {
        connectTimeoutMs: s3.connectTimeoutMs,
        requestTimeoutMs: s3.requestTimeoutMs,
        deadlineMs: s3.deadlineMs,
      },
      ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
      ...(s3.accessKeyId ? { accessKeyId: s3.accessKeyId } : {}),
      ...(s3.secretAccessKey ? { secretAccessKey: s3.secretAccessKey } : {}),
    })
  }
  return new FsBlobStore(config.blobDir)
}

/** The composition root: the one place that picks implementations and wires services. */
export interface SearchLimits {
  pgConcurrency: number
  queue: number
}

/** Default: half the PostgreSQL pool (at least 1) at once, 32 waiting. */
export function defaultSearchLimits(store: Store): SearchLimits {
  return { pgConcurrency: Math.max(1, Math.floor((store.poolSize ?? 2) / 2)), queue: 32 }
}

/** A schema re-index batch failed (never with content): it resumes at the next start. */
function logReindexError(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error)
  process.stderr.write(
    `${JSON.stringify({ level: 50, time: Date.now(), msg: 'schema re-index stopped; it resumes at the next start', error: message })}\n`,
  )
}

/** Where searches run, how many at once (store/bounded-reads.ts). */
function boundedSearchReads(store: Store, options: Partial<SearchLimits> = {}): BoundedReads {
  const limits = { ...defaultSearchLimits(store), ...options }
  const concurrency =
    store.dialect === 'postgres' ? limits.pgConcurrency : (store.readPool?.options.threads ?? 1)
  return new BoundedReads(store.db, { concurrency, queue: limits.queue }, store.readPool)
}

export function createDeps(store: Store, options: DepsOptions): Deps {
  const db = store.db
  const clock = options.clock ?? systemClock
  const hasher = new PasswordHasher(options.argon2, options.hashingLimits)
  const keyring = new Keyring(options.masterKey, dataKeyStore(db), clock)
  const indexer = new Indexer()
  const settings = new SettingsService(db, clock)
  const credentials = new CredentialsService(
    db,
    clock,
    settings,
    store.rights,
    options.accessTokenMaxDays,
  )
  // A cap set or lowered shortens the stored tokens in the same transaction.
  settings.onChange((trx, change) => credentials.applyTokenCap(trx, change))
  const groups = new GroupsService(db, clock)
  const vaults = new VaultsService(db, clock, store.rights)
  const searchReads = boundedSearchReads(store, options.searchLimits)
  // Schemas re-index documents and users, which read their schema: the cycles are closed by
  // late-bound closures (each is only called after construction).
  let documents: DocumentsService | undefined
  let users: UsersService | undefined
  const userSchemas = new UserSchemaService(
    db,
    clock,
    {
      prepare: (accountId) => (users as UsersService).prepareReindex(accountId),
      run: (trx, accountId, schema) => (users as UsersService).reindexAll(trx, accountId, schema),
    },
    (accountId) => (users as UsersService).hasUsers(accountId),
  )
  const schemas = new SchemasService(
    db,
    clock,
    vaults,
    {
      prepare: (accountId) => (documents as DocumentsService).prepareReindex(accountId),
      count: (trx, accountId, vaultId, schemaId) =>
        (documents as DocumentsService).countForSchema(trx, accountId, vaultId, schemaId),
      batch: (trx, accountId, vaultId, schema, after, limit, lock) =>
        (documents as DocumentsService).reindexBatch(
          trx,
          accountId,
          vaultId,
          schema,
          after,
          limit,
          lock,
        ),
    },
    logReindexError,
  )
  users = new UsersService(
    db,
    clock,
    hasher,
    credentials,
    groups,
    keyring,
    indexer,
    // Locked: a user indexed meanwhile waits for (or is seen by) a user-schema update's re-index.
    (trx, accountId) => userSchemas.current(trx, accountId, true),
    settings,
  )
  documents = new DocumentsService(db, clock, keyring, vaults, users, schemas, indexer)
  const throttle = new LoginThrottle(db, clock, options.loginLimits)
  const providers = options.providers ?? DEFAULT_PROVIDERS
  const sendgrid = new SendGridClient({
    baseUrl: providers.sendgridBaseUrl,
    timeoutMs: providers.timeoutMs,
  })
  const twilio = new TwilioClient({
    baseUrl: providers.twilioBaseUrl,
    timeoutMs: providers.timeoutMs,
  })
  const meter = options.meter ?? noopMeter
  const sats = new SatsService(db, clock, meter)
  const passwordResets = new PasswordResetFlowsService(db, clock, keyring, sats, users, sendgrid, {
    tokenTtlMs: (options.passwordResetTtlMinutes ?? 30) * 60_000,
    ...(options.onResetEmailError ? { onSendError: options.onResetEmailError } : {}),
  })
  const mfa = new MfaService(db, clock, keyring, hasher, users, meter)
  users.onDeactivate((trx, accountId, userId) => mfa.forget(trx, accountId, userId))
  const consentOptions = options.consent ?? {
    secret: randomSecret(),
    production: false,
    storefrontSecret: undefined,
    maxSkewSeconds: 90,
  }
  const consentKeys = new ConsentKeys(consentOptions.secret)
  const freeSpace = options.freeSpace ?? FreeSpaceFloor.disabled()
  const metering = new MeteringService(db, clock, settings, meter, options.onMeteringFlushError)
  // A quota changed here holds here at once (other nodes read it again within QUOTA_CACHE_MS).
  settings.onChange(async (_trx, change) => metering.forgetQuota(change.accountId))
  const blobService = new BlobsService(
    db,
    clock,
    keyring,
    options.blobStore,
    vaults,
    users,
    options.onCleanupError,
    meter,
  )
  return {
    store,
    audit:
      options.audit === false ? null : new AuditWriter(db, store.dialect, meter, store.walSync),
    auditEvents: new AuditService(db),
    meter,
    freeSpace,
    clock,
    metering,
    keyring,
    blobs: options.blobStore,
    hasher,
    credentials,
    sats,
    authz: new AuthzService(groups),
    groups,
    users,
    login: new LoginService(
      db,
      hasher,
      users,
      credentials,
      throttle,
      mfa,
      settings,
      options.loginRefusalDelayMs,
      meter,
    ),
    accounts: new AccountsService(db, clock, keyring, users, groups, userSchemas),
    vaults,
    documents,
    schemas,
    userSchemas,
    mfa,
    searchReads,
    search: new SearchService(
      db,
      vaults,
      documents,
      users,
      schemas,
      userSchemas,
      options.searchTimeoutMs,
      meter,
      searchReads,
      options.searchBroadRows,
    ),
    blobService,
    policySimulator: new PolicySimulatorService(
      users,
      groups,
      documents,
      blobService,
      options.policyAccessMaxPairs,
    ),
    sendgrid,
    twilio,
    messaging: new MessagingService(users, sendgrid, twilio, new MessageRateLimit(db, clock)),
    passwordResets,
    consent: new ConsentService(
      db,
      clock,
      consentKeys,
      new ConsentTokens(consentKeys.tokenKey),
      consentOptions,
    ),
    health: new HealthService(db, options.blobStore, options.readyTimeoutMs, freeSpace),
    settings,
  }
}
