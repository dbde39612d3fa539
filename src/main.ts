#!/usr/bin/env node
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import { type CliCommand, runAudited } from './audit/cli.js'
import { parseAuditExportArgs, runAuditExport } from './audit/export.js'
import { pruneAudit, scheduleAuditPruning } from './audit/retention.js'
import { AuditSink } from './audit/sink.js'
import { verifyChains } from './audit/verify.js'
import { AuditWriter } from './audit/writer.js'
import type { BlobStore } from './blob/blob-store.js'
import { type BlobStoreTarget, checkBlobStoreAtStart } from './blob/startup-check.js'
import {
  type Config,
  ConfigError,
  clusterBlobProblems,
  loadConfig,
  SERVE_MODES,
  type ServeMode,
} from './config.js'
import {
  EnvFileError,
  type EnvFileOutcome,
  loadEnvFile,
  settingsForLog,
} from './config-env-file.js'
import { buildConsentApp } from './consent-app.js'
import { blobStoreFor, createDeps, type Deps } from './deps.js'
import { checkListenAddresses } from './http/listen-check.js'
import { buildMetricsApp } from './http/metrics.js'
import { closeOnSignals } from './http/shutdown.js'
import {
  type ListenerTls,
  loadListenerTls,
  type ServedListener,
  startCertificateReloads,
} from './http/tls-listeners.js'
import { transportProblems } from './http/transport-guard.js'
import { isUuid } from './lib/ids.js'
import { startupHeapDone } from './lib/startup-heap.js'
import type { Meter } from './metrics/meter.js'
import type { Metrics } from './metrics/prometheus.js'
import { bootstrapFirstAccount } from './modules/accounts/bootstrap.js'
import { backupSummary, createBackup } from './modules/backup/backup-create.js'
import {
  type BackupLocation,
  describeLocation,
  openBackup,
  parseLocation,
} from './modules/backup/backup-file.js'
import { heldMasterKeys } from './modules/backup/backup-keys.js'
import {
  assertRestorable,
  authenticateBackup,
  type ConsentSecretPlace,
  consentSecretProblem,
  restoreConsentSecret,
  restoreInto,
  targetProblem,
} from './modules/backup/backup-restore.js'
import { type BackupScheduler, scheduleBackups } from './modules/backup/backup-schedule.js'
import { verifyBackup } from './modules/backup/backup-verify.js'
import { type CheckInput, runCheck } from './modules/backup/check.js'
import { scratchFor } from './modules/backup/scratch.js'
import { CONSENT_USAGE, parseExportArgs, runConsentExport } from './modules/consent/consent-cli.js'
import { loadConsentSecret } from './modules/consent/consent-secret.js'
import { encryptReport, keyReport } from './modules/keys/db-command.js'
import { type PreparedSqliteFile, prepareSqliteFile } from './modules/keys/file-key.js'
import { backfillFingerprints } from './modules/keys/fingerprint-backfill.js'
import { watchKeyFiles } from './modules/keys/key-file-watcher.js'
import { loadMasterKey } from './modules/keys/master-key-source.js'
import {
  reencryptAccount,
  reencryptedColumns,
  sealedRecordColumns,
} from './modules/keys/reencrypt.js'
import { runKeyRotation } from './modules/keys/rotate-command.js'
import { terminalProgress } from './modules/keys/terminal-progress.js'
import { FreeSpaceFloor } from './storage/free-space-floor.js'
import { accountsWithDataKeys } from './store/data-keys.repo.js'
import { isPostgresUrl, openStore, type Store, type StoreOptions } from './store/db.js'
import { migrateTo, migrateToLatest } from './store/migrate.js'

const USAGE = `usage: coffer <command>

commands:
  serve            run the API server and the consent API (migrates the database first);
                   --only api|consent runs one of them (or COFFER_SERVE)
  migrate          bring the database schema up to date
  account create   create an account with an admin user; prints its credentials as JSON
  keys rotate      re-wrap every data key under the current master key, online and resumable
                   (content is not rewritten; README: key rotation runbook)
  keys reencrypt [--account <id>]
                   new data keys, every document and user's attributes re-encrypted under
                   them, online and resumable
  mfa reset <account_id> <user_id>
                   unenroll a user from MFA (recovery after a lost device); prints JSON
  audit verify [--account <id>]
                   check the audit trail's hash chains; names each changed, removed or
                   reordered event (exit code 2 when one is found)
  audit export --format jsonl|csv [--account <id>] [--from <iso>] [--to <iso>] [--out <file>]
                   write audit events to stdout (or a file)
  backup create <file|s3://bucket/key>
                   one consistent, encrypted backup while servers keep serving
  backup verify <file|s3://bucket/key> [--scratch <dir>]
                   restore into a scratch location and check everything (exit 2 naming the
                   first problem)
  backup restore <file|s3://bucket/key>
                   restore into the configured, empty database and BLOB store
  check            every data key unwraps, every record and BLOB decrypts, no BLOB object is
                   missing or orphaned (exit 2 naming the problems)
  db encrypt       convert a plaintext SQLite database of an earlier release (start does it too)
  db key [--print] the SQLite file's cipher settings; --print also prints its key and the
                   commands that open the file with SQLCipher or SQLite3MultipleCiphers
${CONSENT_USAGE}`

type Log = (msg: object, text: string) => void

/** Messages of commands go to stderr: their stdout is their answer. */
const stderrLog: Log = (obj, msg) => process.stderr.write(`${msg} ${JSON.stringify(obj)}\n`)

/** A SQLite file (not PostgreSQL, not `:memory:`): encrypted, with a file key (issue 22). */
function isSqliteFile(config: Config): boolean {
  return !isPostgresUrl(config.databaseUrl) && config.databaseUrl !== ':memory:'
}

/**
 * The configured database's store options; `readWorkers`: SQLite search threads; `sqliteKey`:
 * the file key of an encrypted SQLite file (prepareSqliteFile).
 */
function storeOptionsOf(
  config: Config,
  readWorkers = 0,
  sqliteKey?: Buffer,
): StoreOptions & { pg: PgOptions } {
  const limits = config.database
  return {
    url: config.databaseUrl,
    sqliteBusyTimeoutMs: limits.sqliteBusyTimeoutMs,
    sqliteReadWorkers: readWorkers,
    ...(sqliteKey ? { sqliteKey } : {}),
    pg: {
      poolSize: limits.pgPoolSize,
      connectTimeoutMs: limits.pgConnectTimeoutMs,
      statementTimeoutMs: limits.pgStatementTimeoutMs,
      idleTimeoutMs: limits.pgIdleTimeoutMs,
    },
  }
}

type PgOptions = NonNullable<StoreOptions['pg']>

/** The database, its WAL, keys and credentials files are readable by this user only. */
function prepareDataDir(config: Config): void {
  process.umask(0o077)
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
}

/**
 * A SQLite file readied (modules/keys/file-key.ts: its key unwrapped, a plaintext file of an
 * earlier release converted), which needs the master keys: they come back with it.
 */
async function readySqliteFile(config: Config, log: Log): Promise<PreparedSqliteFile | undefined> {
  if (!isSqliteFile(config)) return undefined
  const sqlite = await prepareSqliteFile(config)
  for (const note of sqlite.recovered) log({ file: config.databaseUrl }, note)
  if (sqlite.converted)
    log(
      { file: config.databaseUrl, ...sqlite.converted },
      'encrypted the plaintext database and erased the plaintext file',
    )
  return sqlite
}

/**
 * The database, migrated. `readWorkers`: SQLite search threads, for `serve` only (commands run
 * no searches).
 */
async function openDatabase(
  config: Config,
  options: { readWorkers?: number; log?: Log } = {},
): Promise<{ store: Store; sqlite?: PreparedSqliteFile }> {
  prepareDataDir(config)
  const sqlite = await readySqliteFile(config, options.log ?? stderrLog)
  const storeOptions = storeOptionsOf(config, options.readWorkers ?? 0, sqlite?.key)
  // Migrations (a re-index on a large database) may legitimately outlast the statement timeout
  // that bounds requests: they run on a connection of their own without one.
  if (isPostgresUrl(config.databaseUrl)) {
    const migrations = openStore({
      ...storeOptions,
      pg: { ...storeOptions.pg, poolSize: 1, statementTimeoutMs: 0 },
    })
    try {
      await migrateToLatest(migrations.db)
    } finally {
      await migrations.close()
    }
    return { store: openStore(storeOptions) }
  }
  const store = openStore(storeOptions)
  try {
    await migrateToLatest(store.db)
  } catch (error) {
    await store.close()
    throw error
  }
  return { store, ...(sqlite ? { sqlite } : {}) }
}

/** The migrated database, for commands that need no master key themselves. */
async function open(config: Config): Promise<Store> {
  return (await openDatabase(config)).store
}

/**
 * The free-space floor of the folders this node writes to: the SQLite file's and the BLOB
 * folder (on PostgreSQL too); an S3 bucket and a PostgreSQL server watch their own disks.
 */
function freeSpaceFloor(config: Config, meter: Meter | undefined): FreeSpaceFloor {
  const paths = [
    ...(isPostgresUrl(config.databaseUrl) ? [] : [dirname(resolve(config.databaseUrl))]),
    ...(config.blobStore === 's3' ? [] : [config.blobDir]),
  ]
  return new FreeSpaceFloor({
    paths,
    minFreeBytes: config.operations.minFreeBytes,
    ...(meter ? { meter } : {}),
  })
}

/**
 * Everything the data plane needs. Refuses to go on when the master key does not unlock the
 * stored data keys, and encrypts attributes left in plaintext by an older version.
 */
async function start(
  config: Config,
  log: (msg: object, text: string) => void,
  options: { withConsent?: boolean; meter?: Meter; blobStore?: BlobStore } = {},
) {
  const { withConsent = false, meter } = options
  const { store, sqlite } = await openDatabase(config, { readWorkers: config.search.workers, log })
  // A SQLite file needed the master keys to open: they came with it.
  const { key, keys, generated } = sqlite
    ? { key: sqlite.keys.current, keys: sqlite.keys, generated: sqlite.generated }
    : await loadMasterKey(config, store)
  if (generated)
    log({ file: config.masterKeyFile, master_key_id: key.id }, 'generated a new master key')
  const consent = withConsent ? await consentOptions(config, store, log) : undefined
  const deps = createDeps(store, {
    ...(consent ? { consent } : {}),
    masterKey: keys,
    blobStore: options.blobStore ?? (await blobStoreFor(config)),
    ...(meter ? { meter } : {}),
    providers: config.providers,
    hashingLimits: config.argon2,
    loginLimits: {
      perAddress: {
        max: config.login.perAddressMax,
        windowMs: config.login.perAddressWindowSeconds * 1000,
      },
      global: { max: config.login.globalMax, windowMs: config.login.globalWindowSeconds * 1000 },
      inFlightWaitMs: config.login.inFlightWaitMs,
    },
    loginRefusalDelayMs: config.login.refusalDelayMs,
    passwordResetTtlMinutes: config.passwordResetTtlMinutes,
    accessTokenMaxDays: config.accessTokenMaxDays,
    searchTimeoutMs: config.searchTimeoutMs,
    searchLimits: { pgConcurrency: config.search.pgConcurrency, queue: config.search.queue },
    audit: config.audit,
    readyTimeoutMs: config.operations.readyTimeoutMs,
    freeSpace: freeSpaceFloor(config, meter),
    onResetEmailError: (error, { flowId }) =>
      log(
        { flow_id: flowId, error: error instanceof Error ? error.message : String(error) },
        'password reset email not sent',
      ),
    // An object whose row is gone but that could not be deleted is garbage, never data loss.
    onCleanupError: (error, objectKey) =>
      log(
        { object_key: objectKey, error: error instanceof Error ? error.message : String(error) },
        'blob object left behind',
      ),
    // Kept in memory and tried again at the next interval: logged, nothing lost yet.
    onMeteringFlushError: (error) =>
      log(
        { error: error instanceof Error ? error.message : String(error) },
        'operation counts not stored yet',
      ),
  })
  await deps.keyring.assertUnlocks()
  // Migration 0019's backfill: it needs the master keys, so it runs here.
  const fingerprinted = await backfillFingerprints(store, keys)
  if (fingerprinted > 0) log({ data_keys: fingerprinted }, 'recorded master key fingerprints')
  const encrypted = await deps.users.encryptPlaintextAttributes()
  if (encrypted > 0) log({ users: encrypted }, 'encrypted user attributes stored in plaintext')
  return { store, deps, ...(sqlite ? { sqliteKey: sqlite.key } : {}) }
}

/** The consent API's secret (generated once on SQLite) and storefront settings. */
async function consentOptions(
  config: Config,
  store: Store,
  log: (msg: object, text: string) => void,
) {
  const { secret, generated } = await loadConsentSecret(config, store, { generate: true })
  if (generated) log({ file: config.consentJwtSecretFile }, 'generated a new consent secret')
  const production = config.env === 'production'
  if (production && !config.storefrontSecret) {
    log({}, 'COFFER_STOREFRONT_SECRET is not set: storefront consent requests will answer 500')
  }
  return {
    secret,
    production,
    storefrontSecret: config.storefrontSecret,
    maxSkewSeconds: config.storefrontMaxSkewSeconds,
    unchosenTtlDays: config.consentUnchosenTtlDays,
  }
}

/** First start on an empty database: an account and admin, credentials to a 0600 file. */
async function bootstrap(config: Config, deps: Deps, log: (msg: object, text: string) => void) {
  const outcome = await bootstrapFirstAccount(deps.accounts, config.dataDir)
  if (outcome.created) {
    log(
      { account_id: outcome.accountId, file: outcome.file },
      'created the first account; admin credentials written to file',
    )
  } else if (outcome.reason === 'another-node') {
    log(
      {},
      'another node created the first account; its credentials are in that node’s data folder',
    )
  }
}

async function serve(config: Config, mode: ServeMode, envFile: EnvFileOutcome): Promise<void> {
  // Messages from before the app's logger exists are kept and logged once it does.
  const pending: [object, string][] = []
  // Names only: the values are settings, some of them secrets.
  if (envFile.file) pending.push([settingsForLog(envFile), 'read settings file'])
  let log = (obj: object, msg: string) => {
    pending.push([obj, msg])
  }
  const metricsConfig = config.operations.metrics
  const { blobStore, tls } = await checkBeforeWriting(config, mode)
  const metrics = await metricsFor(config)
  const { store, deps, sqliteKey } = await start(config, (obj, msg) => log(obj, msg), {
    withConsent: mode !== 'api',
    ...(metrics ? { meter: metrics.meter } : {}),
    blobStore,
  })
  if (metrics && store.poolStats) metrics.watchPool(store.poolStats)
  // Retention (COFFER_AUDIT_RETENTION_DAYS): whole verified UTC days past it, every hour.
  const retention = config.auditRetentionDays
  const auditPruning =
    retention === undefined
      ? undefined
      : scheduleAuditPruning(() => pruneAudit(store.db, store.dialect, new Date(), retention), {
          done: (r) => {
            if (Object.keys(r.pruned).length > 0 || r.refused.length > 0)
              log({ pruned: r.pruned, refused: r.refused }, 'audit retention pass')
          },
          failed: (error) =>
            log(
              { error: error instanceof Error ? error.message : String(error) },
              'audit retention pass failed',
            ),
        })
  // The optional streaming copy of the trail (COFFER_AUDIT_SINK), after each durable append;
  // only while serving (a command's stdout is its own answer).
  for (const target of config.auditSink) {
    const sink = AuditSink.open(target)
    deps.audit?.onStored((events) => sink.write(events))
  }
  // Without a port of its own, `/metrics` is served on the API listeners (behind the token).
  const appMetrics = metrics
    ? { metrics, serve: metricsConfig.port === undefined, token: metricsConfig.token }
    : undefined
  const deadlines = {
    requestTimeoutMs: config.database.requestTimeoutMs,
    blobUploadTimeoutMs: config.database.blobUploadTimeoutMs,
  }
  const app =
    mode === 'consent'
      ? undefined
      : await buildApp(deps, {
          logger: { level: config.logLevel },
          trustProxy: config.trustProxy,
          bodyLimit: config.bodyLimitBytes,
          cors: { origins: config.cors.origins, maxAgeSeconds: config.cors.maxAgeSeconds },
          deadlines,
          ...(appMetrics ? { metrics: appMetrics } : {}),
          ...(tls.api ? { tls: tls.api } : {}),
          hstsMaxAgeSeconds: config.tls.hstsMaxAgeSeconds,
          backupSchedule: config.backup,
        })
  // One process, one log stream: the consent app logs through the main app's logger.
  const consentApp =
    mode === 'api'
      ? undefined
      : await buildConsentApp(deps, {
          ...(app ? { loggerInstance: app.log } : { logger: { level: config.logLevel } }),
          rateLimit: config.consentRateLimit,
          pruneIntervalMs: config.consentPruneIntervalSeconds * 1000,
          trustProxy: config.trustProxy,
          cors: { origins: config.cors.consentOrigins, maxAgeSeconds: config.cors.maxAgeSeconds },
          deadlines,
          ...(appMetrics ? { metrics: appMetrics } : {}),
          ...(tls.consent ? { tls: tls.consent } : {}),
          hstsMaxAgeSeconds: config.tls.hstsMaxAgeSeconds,
        })
  const first = (app ?? consentApp) as NonNullable<typeof app>
  log = (obj, msg) => first.log.info(obj, msg)
  for (const [obj, msg] of pending) log(obj, msg)
  for (const note of config.startupNotes) log({}, note)
  // The main API comes up first: its account is bootstrapped and its address is logged first.
  if (app) {
    await bootstrap(config, deps, (obj, msg) => app.log.info(obj, msg))
    await app.listen({ host: config.host, port: config.port })
  }
  await consentApp?.listen({
    host: config.consentHost,
    port: config.consentPort,
    listenTextResolver: (address) => `Consent API listening at ${address}`,
  })
  const metricsApp =
    metrics && metricsConfig.port !== undefined
      ? await buildMetricsApp(metrics, metricsConfig.token)
      : undefined
  await metricsApp?.listen({ host: metricsConfig.host, port: metricsConfig.port })
  if (metricsApp) log({}, `Metrics listening at ${listenAddress(metricsApp)}`)
  startupHeapDone()
  const served: ServedListener[] = []
  if (app && tls.api) served.push({ listener: 'api', server: tlsServer(app), material: tls.api })
  if (consentApp && tls.consent)
    served.push({ listener: 'consent', server: tlsServer(consentApp), material: tls.consent })
  const reloader = startCertificateReloads(config, served, first.log)
  // `coffer keys rotate` on the key files: the new keys are held without a restart.
  const keyFiles = watchKeyFiles({
    config,
    keys: deps.keyring.masterKeys,
    store,
    log: (obj, msg) => first.log.info(obj, msg),
  })
  // COFFER_BACKUP_SCHEDULE: each slot taken by one node of the cluster (decisions 238).
  const backups = scheduledBackups(
    config,
    store,
    deps,
    (obj, msg) => first.log.info(obj, msg),
    sqliteKey,
  )
  if (metrics && backups) metrics.watchBackups(() => backups.freshStats())
  let backupsStopped: Promise<void> | undefined
  closeOnSignals({
    apps: [app, consentApp, metricsApp].filter((a) => a !== undefined),
    health: deps.health,
    closeStore: async () => {
      // A backup in progress was stopped when the shutdown began (its partial output removed).
      await backupsStopped
      // A retention pass and a re-index batch in progress finish before the store closes; so do
      // the queued audit events, and a later one is refused at once (http/audit.ts: the answer
      // stays as it was).
      await auditPruning?.stop()
      await deps.schemas.stopReindexes()
      await deps.audit?.close()
      await store.close()
    },
    delayMs: config.operations.shutdownDelayMs,
    graceMs: config.operations.shutdownGraceMs,
    log: first.log,
    // With TLS, SIGHUP reloads the certificates (certbot's deploy hook) instead of stopping.
    ...(reloader ? { handledElsewhere: ['SIGHUP'] as const } : {}),
    onShutdown: () => {
      keyFiles.stop()
      reloader?.stop()
      backupsStopped = backups?.stop()
    },
  })
  // Background work starts only once a signal would stop it cleanly: awaited before the
  // handlers above, a SIGTERM in that window met Node's default action and killed the process.
  if (app && !deps.health.draining) {
    // Schema re-indexes a stopped server left unfinished go on from their last batch.
    const resumed = await deps.schemas.resumeReindexes()
    if (resumed > 0) app.log.info({ schemas: resumed }, 'resuming schema re-indexes')
  }
}

/** The backup schedule of `coffer serve`, when COFFER_BACKUP_SCHEDULE is set. */
function scheduledBackups(
  config: Config,
  store: Store,
  deps: Deps,
  log: (obj: object, msg: string) => void,
  sqliteKey: Buffer | undefined,
): BackupScheduler | undefined {
  const { schedule, target, keep } = config.backup
  if (!schedule || !target) return undefined
  return scheduleBackups({
    cron: schedule,
    target,
    keep,
    s3: config.s3,
    db: store.db,
    run: (location, signal) => scheduledBackup(config, store, deps, location, signal, sqliteKey),
    draining: () => deps.health.draining,
    log,
    meter: deps.meter,
  })
}

/** One scheduled backup: the snapshot on a connection of its own, the node's services. */
async function scheduledBackup(
  config: Config,
  store: Store,
  deps: Deps,
  location: BackupLocation,
  signal: AbortSignal,
  sqliteKey: Buffer | undefined,
) {
  if (location.kind === 'file') mkdirSync(dirname(location.path), { recursive: true, mode: 0o700 })
  const options = storeOptionsOf(config, 0, sqliteKey)
  const snapshotStore = openStore({
    ...options,
    pg: { ...options.pg, poolSize: 1, statementTimeoutMs: 0 },
  })
  try {
    const consentSecret = consentSecretFile(config)
    return await createBackup({
      snapshotStore,
      live: store.db,
      blobStore: deps.blobs,
      masterKey: deps.keyring.master,
      ...(consentSecret !== undefined ? { consentSecret } : {}),
      location,
      s3: config.s3,
      signal,
    })
  } finally {
    await snapshotStore.close()
  }
}

/** A TLS app's server (an HTTP/2 secure server, typed as Fastify's HTTP one). */
function tlsServer(app: FastifyInstance): ServedListener['server'] {
  return app.server as unknown as ServedListener['server']
}

/**
 * What settings alone cannot tell, checked before anything is written (a database file, a key,
 * the first account): the cluster BLOB rule, the production transport rule (no listener off
 * loopback without TLS), every listener's address, each TLS listener's pair, and (when the main
 * API, the only user of BLOBs, is served) that the BLOB store can be used. Returns that store
 * and the pairs.
 */
async function checkBeforeWriting(
  config: Config,
  mode: ServeMode,
): Promise<{ blobStore: BlobStore; tls: ListenerTls }> {
  const servesApi = mode !== 'consent'
  const problems = [
    ...(servesApi ? clusterBlobProblems(config) : []),
    ...(await transportProblems(config, mode)),
  ]
  if (problems.length > 0) throw new ConfigError(problems)
  const metrics = config.operations.metrics
  await checkListenAddresses([
    ...(servesApi
      ? [{ settings: 'COFFER_HOST/COFFER_PORT', host: config.host, port: config.port }]
      : []),
    ...(mode !== 'api'
      ? [
          {
            settings: 'COFFER_CONSENT_HOST/COFFER_CONSENT_PORT',
            host: config.consentHost,
            port: config.consentPort,
          },
        ]
      : []),
    ...(metrics.port !== undefined
      ? [
          {
            settings: 'COFFER_METRICS_HOST/COFFER_METRICS_PORT',
            host: metrics.host,
            port: metrics.port,
          },
        ]
      : []),
  ])
  const tls = await loadListenerTls(config, mode)
  const blobStore = await blobStoreFor(config)
  if (servesApi) {
    await checkBlobStoreAtStart(blobStore, blobStoreTarget(config), config.blobCheckTimeoutMs)
  }
  return { blobStore, tls }
}

function blobStoreTarget(config: Config): BlobStoreTarget {
  if (config.blobStore === 's3' && config.s3) {
    const { bucket, endpoint, region } = config.s3
    return { kind: 's3', bucket, endpoint, region }
  }
  const byDefault = config.blobDir === join(config.dataDir, 'blobs')
  return {
    kind: 'fs',
    dir: config.blobDir,
    dirSetting: byDefault ? 'COFFER_DATA_DIR' : 'COFFER_BLOB_DIR',
  }
}

/**
 * Metrics are collected only when served: on their own port, or behind a token. prom-client is
 * loaded only then.
 */
async function metricsFor(config: Config): Promise<Metrics | undefined> {
  const m = config.operations.metrics
  if (m.port === undefined && m.token === undefined) return undefined
  const { Metrics } = await import('./metrics/prometheus.js')
  return new Metrics()
}

function listenAddress(app: FastifyInstance): string {
  const address = app.server.address()
  return typeof address === 'object' && address ? `http://${address.address}:${address.port}` : ''
}

/** `coffer keys rotate` (modules/keys/rotate-command.ts), under the audit trail. */
async function rotateKeys(config: Config): Promise<void> {
  const store = await open(config)
  const progress = terminalProgress('re-wrapped', 'data keys')
  try {
    const result = await runKeyRotation(
      config,
      store,
      (fn) =>
        runAudited(
          new AuditWriter(store.db, store.dialect),
          { operation: 'cli.keys.rotate', route: 'coffer keys rotate' },
          fn,
        ),
      { onProgress: (p) => progress.update(p.rewrapped, p.total) },
    )
    progress.end()
    const { rewrapped, notUnderCurrent, previousMayBeRetired, byMasterKey, ...rest } = result
    process.stdout.write(
      `${JSON.stringify(
        {
          ...rest,
          rotated_data_keys: rewrapped,
          not_under_current: notUnderCurrent,
          previous_may_be_retired: previousMayBeRetired,
          data_keys_by_master_key: byMasterKey,
        },
        null,
        2,
      )}\n`,
    )
  } finally {
    progress.end()
    await store.close()
  }
}

/** `--account <id>` of `keys reencrypt`: undefined for every account, null when malformed. */
function reencryptAccountArg(args: string[]): string | undefined | null {
  if (args.length === 0) return undefined
  const [flag, id, ...rest] = args
  if (flag !== '--account' || !id || rest.length > 0 || !isUuid(id)) return null
  return id.toLowerCase()
}

/** `coffer keys reencrypt`: each account in turn (modules/keys/reencrypt.ts). */
async function reencryptCommand(store: Store, deps: Deps, accountId: string | undefined) {
  const known = await accountsWithDataKeys(store.db)
  if (accountId !== undefined && !known.includes(accountId)) {
    throw new Error(`no account ${accountId} (or it holds no encrypted data)`)
  }
  const accounts = accountId ? [accountId] : known
  const columns = reencryptedColumns(deps)
  const progress = terminalProgress('re-encrypted', 'records')
  let records = 0
  const results = []
  try {
    for (const [i, account] of accounts.entries()) {
      results.push(
        await reencryptAccount(deps.keyring, columns, account, {
          onRecord: () =>
            progress.update(++records, records, `(account ${i + 1}/${accounts.length})`),
        }),
      )
    }
  } finally {
    progress.end()
  }
  const done = results.every((r) => r.remaining === 0)
  return { done, accounts: results }
}

/** What `coffer check` reads, from a node's (or a scratch store's) services. */
function checkInputOf(deps: Deps, onProgress?: CheckInput['onProgress']): CheckInput {
  return {
    db: deps.store.db,
    keyring: deps.keyring,
    columns: sealedRecordColumns(deps),
    blobs: deps.blobService.sealedColumn(),
    blobStore: deps.blobs,
    blobObjectKey: (account, vault, blob) => deps.blobService.objectKeyOf(account, vault, blob),
    ...(onProgress ? { onProgress } : {}),
  }
}

/** The consent secret's place on this node (modules/consent/consent-secret.ts reads the same). */
function consentPlace(config: Config): ConsentSecretPlace {
  return { fromEnvironment: config.consentJwtSecret, file: config.consentJwtSecretFile }
}

/** The generated consent secret file's content (a backup carries it), when there is one. */
function consentSecretFile(config: Config): string | undefined {
  if (config.consentJwtSecret || !existsSync(config.consentJwtSecretFile)) return undefined
  return readFileSync(config.consentJwtSecretFile, 'utf8').trim()
}

/** `coffer backup create <target>`: the snapshot runs on a store of its own (backup-create.ts). */
async function backupCreate(config: Config, target: string): Promise<number> {
  const location = parseLocation(target)
  const { store, deps, sqliteKey } = await start(config, (obj, msg) =>
    process.stderr.write(`${msg} ${JSON.stringify(obj)}\n`),
  )
  const options = storeOptionsOf(config, 0, sqliteKey)
  const snapshotStore = openStore({
    ...options,
    pg: { ...options.pg, poolSize: 1, statementTimeoutMs: 0 },
  })
  const progress = terminalProgress('backed up', 'rows and objects')
  try {
    const consentSecret = consentSecretFile(config)
    const result = await audited(
      deps,
      { operation: 'cli.backup.create', route: 'coffer backup create <target>' },
      () =>
        createBackup({
          snapshotStore,
          live: store.db,
          blobStore: deps.blobs,
          masterKey: deps.keyring.master,
          ...(consentSecret !== undefined ? { consentSecret } : {}),
          location,
          s3: config.s3,
          onProgress: (done, total) => progress.update(done, total),
        }),
    )
    progress.end()
    const summary = {
      backup: result.location,
      bytes: result.bytes,
      ...backupSummary(result.manifest),
    }
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`)
    return 0
  } finally {
    progress.end()
    await snapshotStore.close()
    await store.close()
  }
}

/** `backup verify <target> [--scratch <dir>]`. */
function verifyArgs(args: string[]): { target: string; scratch: string } | undefined {
  const [target, flag, dir, ...rest] = args
  if (!target || rest.length > 0) return undefined
  if (flag === undefined) return { target, scratch: tmpdir() }
  return flag === '--scratch' && dir ? { target, scratch: dir } : undefined
}

/** `coffer backup verify`: exit 0 only when the backup restores and everything in it opens. */
async function backupVerify(config: Config, target: string, scratchDir: string): Promise<number> {
  const location = parseLocation(target)
  const keys = heldMasterKeys(config)
  const admin = isPostgresUrl(config.databaseUrl) ? openStore(storeOptionsOf(config)) : undefined
  const backup = await openBackup(location, config.s3)
  const progress = terminalProgress('restored', 'rows and objects (scratch)')
  try {
    const report = await verifyBackup(
      backup.stream,
      keys,
      (meta) =>
        scratchFor(
          meta.database,
          scratchDir,
          admin ? { admin: admin.db, options: storeOptionsOf(config) } : undefined,
        ),
      (scratch) => {
        const deps = createDeps(scratch.store, {
          masterKey: keys,
          blobStore: scratch.blobStore,
          audit: false,
        })
        return runCheck(checkInputOf(deps))
      },
      (done) => progress.update(done, done),
    )
    progress.end()
    const { manifest, check, ...rest } = report
    const out = {
      backup: describeLocation(location),
      ...rest,
      ...(manifest ? backupSummary(manifest) : {}),
      ...(check ? { check } : {}),
    }
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    if (!report.ok) process.stderr.write(`backup verify: ${report.problem}\n`)
    return report.ok ? 0 : 2
  } finally {
    progress.end()
    backup.close()
    await admin?.close()
  }
}

/**
 * `coffer backup restore`: the whole backup is read and checked first; then the target must be
 * empty (database and BLOB store) and the consent secret compatible; only then is anything
 * written. Exit 2 when refused (nothing changed).
 */
async function backupRestore(config: Config, target: string): Promise<number> {
  const location = parseLocation(target)
  const keys = heldMasterKeys(config)
  const dialect = isPostgresUrl(config.databaseUrl) ? 'postgres' : 'sqlite'
  if (config.databaseUrl === ':memory:') throw new Error('restore needs a database file')
  // What the restore writes (database, objects, the consent secret) is this user's only.
  process.umask(0o077)
  const refuse = (problem: string) => {
    process.stderr.write(`backup restore refused: ${problem}; nothing was changed\n`)
    return 2
  }
  const checking = terminalProgress('checked', 'object bytes')
  let first: Awaited<ReturnType<typeof authenticateBackup>>
  const pass = await openBackup(location, config.s3)
  try {
    first = await authenticateBackup(pass.stream, keys, (bytes) => checking.update(bytes, bytes))
  } catch (error) {
    return refuse(error instanceof Error ? error.message : String(error))
  } finally {
    checking.end()
    pass.close()
  }
  try {
    assertRestorable(first.manifest, dialect)
  } catch (error) {
    return refuse(error instanceof Error ? error.message : String(error))
  }
  const blobStore = await blobStoreFor(config)
  const exists = dialect === 'postgres' || existsSync(config.databaseUrl)
  // A SQLite target is encrypted under its own file key, made here for a new file (issue 22).
  if (!exists) prepareDataDir(config)
  const sqlite = dialect === 'sqlite' ? await readySqliteFile(config, stderrLog) : undefined
  // Migrations over restored rows of an older release may outlast the statement timeout.
  const options = storeOptionsOf(config, 0, sqlite?.key)
  const restoreOptions = { ...options, pg: { ...options.pg, statementTimeoutMs: 0 } }
  const store = exists ? openStore(restoreOptions) : undefined
  const problem =
    (await targetProblem(store, blobStore)) ??
    consentSecretProblem(consentPlace(config), first.consentSecret)
  if (problem) {
    await store?.close()
    return refuse(problem)
  }
  const restoreStore = store ?? openStore(restoreOptions)
  const progress = terminalProgress('restored', 'rows and objects')
  const backup = await openBackup(location, config.s3)
  try {
    const { manifest } = await restoreInto(
      backup.stream,
      keys,
      async () => ({
        store: restoreStore,
        blobStore,
        migrateTo: async (name) => {
          await migrateTo(restoreStore.db, name)
        },
      }),
      { onProgress: (done) => progress.update(done, first.items) },
    )
    progress.end()
    await migrateToLatest(restoreStore.db)
    const wroteSecret = restoreConsentSecret(consentPlace(config), first.consentSecret)
    // Recorded in the restored trail once everything is in (a failed restore leaves it empty).
    await runAudited(
      new AuditWriter(restoreStore.db, restoreStore.dialect),
      { operation: 'cli.backup.restore', route: 'coffer backup restore <backup>' },
      async () => {},
    )
    const summary = {
      restored: describeLocation(location),
      ...backupSummary(manifest),
      ...(wroteSecret ? { consent_secret_file: config.consentJwtSecretFile } : {}),
    }
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`)
    return 0
  } finally {
    progress.end()
    backup.close()
    await restoreStore.close()
  }
}

/** `coffer check` on the configured database and BLOB store. */
async function checkCommand(config: Config): Promise<number> {
  const { store, deps } = await start(config, (obj, msg) =>
    process.stderr.write(`${msg} ${JSON.stringify(obj)}\n`),
  )
  const progress = terminalProgress('checked', 'items')
  try {
    const report = await runCheck(
      checkInputOf(deps, (done, note) => progress.update(done, done, note)),
    )
    progress.end()
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
    return report.ok ? 0 : 2
  } finally {
    progress.end()
    await store.close()
  }
}

/**
 * `coffer db encrypt` and `coffer db key [--print]` (modules/keys/db-command.ts): the embedded
 * database only. Both are audited (`cli.db.encrypt`, `cli.db.key.print`); `db key` without
 * `--print` reads nothing secret and writes no event.
 */
async function dbCommand(config: Config, sub: 'encrypt' | 'key', args: string[]): Promise<number> {
  const print = args.length === 1 && args[0] === '--print'
  if (args.length > 0 && !(sub === 'key' && print)) {
    process.stderr.write(`usage: coffer db encrypt | coffer db key [--print]\n`)
    return 1
  }
  if (!isSqliteFile(config)) {
    process.stderr.write(
      `coffer db ${sub} is for the embedded SQLite file; ${config.databaseUrl === ':memory:' ? 'an in-memory database has no file' : 'PostgreSQL keeps its data on the storage its operator provides (README: data at rest)'}\n`,
    )
    return 1
  }
  const { store, sqlite } = await openDatabase(config)
  try {
    const prepared = sqlite as PreparedSqliteFile
    const report =
      sub === 'encrypt'
        ? encryptReport(config.databaseUrl, prepared)
        : keyReport(config.databaseUrl, prepared, print)
    if (sub === 'encrypt' || print) {
      const operation = sub === 'encrypt' ? 'cli.db.encrypt' : 'cli.db.key.print'
      const route = sub === 'encrypt' ? 'coffer db encrypt' : 'coffer db key --print'
      await runAudited(
        new AuditWriter(store.db, store.dialect),
        { operation, route },
        async () => {},
      )
    }
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
    return 0
  } finally {
    await store.close()
  }
}

/** `serve --only api|consent` (or `--only=…`) overrides COFFER_SERVE. */
function serveMode(args: string[], configured: ServeMode): ServeMode {
  if (args.length === 0) return configured
  const value = args[0] === '--only' ? args[1] : /^--only=(.*)$/.exec(args[0] ?? '')?.[1]
  const extra = args[0] === '--only' ? args.slice(2) : args.slice(1)
  if (value === undefined || extra.length > 0 || !SERVE_MODES.includes(value as ServeMode)) {
    throw new Error('serve takes only --only api|consent|both')
  }
  return value as ServeMode
}

/** Runs a data-changing command under the audit trail (audit/cli.ts). */
function audited<T>(deps: Deps, command: CliCommand, fn: () => Promise<T>): Promise<T> {
  return runAudited(deps.audit ?? new AuditWriter(deps.store.db, deps.store.dialect), command, fn)
}

/** `--account <id>` (or none: every chain). */
function auditAccountArg(args: string[]): string | undefined {
  if (args.length === 0) return undefined
  if (args.length === 2 && args[0] === '--account' && args[1] !== undefined) return args[1]
  throw new Error('audit verify takes only --account <account_id>')
}

async function main(argv: string[]): Promise<number> {
  const [command, sub] = argv
  if (!command || command === 'help' || command === '--help') {
    process.stdout.write(USAGE)
    return command ? 0 : 1
  }
  // Before anything reads a setting: the file fills in what the environment does not set.
  const envFile = loadEnvFile()
  const config = loadConfig()
  if (command === 'serve') {
    await serve(config, serveMode(argv.slice(1), config.serve), envFile)
    return -1
  }
  // Any other command may be long (a backup, a rotation): it runs with the default growth.
  startupHeapDone()
  if (command === 'migrate') {
    const store = await open(config)
    await store.close()
    process.stdout.write('database is up to date\n')
    return 0
  }
  if (command === 'account' && sub === 'create') {
    const { store, deps } = await start(config, stderrLog)
    const credentials = await audited(
      deps,
      { operation: 'cli.account.create', route: 'coffer account create' },
      () => deps.accounts.createWithAdmin(),
    ).finally(() => store.close())
    process.stdout.write(`${JSON.stringify(credentials, null, 2)}\n`)
    return 0
  }
  if (command === 'mfa' && sub === 'reset') {
    const [accountId, userId] = argv.slice(2)
    if (!accountId || !userId || !isUuid(accountId) || !isUuid(userId)) {
      process.stderr.write(`usage: coffer mfa reset <account_id> <user_id> (UUIDs)\n`)
      return 1
    }
    const { store, deps } = await start(config, stderrLog)
    try {
      await audited(
        deps,
        {
          operation: 'cli.mfa.reset',
          route: 'coffer mfa reset <account_id> <user_id>',
          accountId: accountId.toLowerCase(),
          userId: userId.toLowerCase(),
        },
        () => deps.mfa.reset(accountId.toLowerCase(), userId.toLowerCase()),
      )
    } finally {
      await store.close()
    }
    const result = { account_id: accountId.toLowerCase(), user_id: userId.toLowerCase() }
    process.stdout.write(`${JSON.stringify({ ...result, mfa_enrolled: false }, null, 2)}\n`)
    return 0
  }
  if (command === 'keys' && sub === 'rotate') {
    await rotateKeys(config)
    return 0
  }
  if (command === 'keys' && sub === 'reencrypt') {
    const accountId = reencryptAccountArg(argv.slice(2))
    if (accountId === null) {
      process.stderr.write('usage: coffer keys reencrypt [--account <account_id>] (a UUID)\n')
      return 1
    }
    const { store, deps } = await start(config, stderrLog)
    try {
      const report = await audited(
        deps,
        {
          operation: 'cli.keys.reencrypt',
          route: 'coffer keys reencrypt [--account <account_id>]',
          ...(accountId ? { accountId } : {}),
        },
        () => reencryptCommand(store, deps, accountId),
      )
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
      return report.done ? 0 : 2
    } finally {
      await store.close()
    }
  }
  if (command === 'consent' && sub === 'export') {
    const args = parseExportArgs(argv.slice(2))
    const store = await open(config)
    try {
      await runAudited(
        new AuditWriter(store.db, store.dialect),
        { operation: 'cli.consent.export', route: 'coffer consent export' },
        () => runConsentExport(config, store, args),
      )
    } finally {
      await store.close()
    }
    return 0
  }
  if (command === 'audit' && sub === 'verify') {
    const accountId = auditAccountArg(argv.slice(2))
    const store = await open(config)
    try {
      const report = await verifyChains(store.db, accountId)
      process.stdout.write(
        `${JSON.stringify({ ok: report.problems.length === 0, ...report }, null, 2)}\n`,
      )
      return report.problems.length === 0 ? 0 : 2
    } finally {
      await store.close()
    }
  }
  if (command === 'audit' && sub === 'export') {
    const store = await open(config)
    try {
      await runAuditExport(store.db, parseAuditExportArgs(argv.slice(2)))
    } finally {
      await store.close()
    }
    return 0
  }
  if (command === 'backup' && (sub === 'create' || sub === 'restore')) {
    const [target, ...rest] = argv.slice(2)
    if (!target || rest.length > 0) {
      process.stderr.write(`usage: coffer backup ${sub} <file|s3://bucket/key>\n`)
      return 1
    }
    return sub === 'create' ? backupCreate(config, target) : backupRestore(config, target)
  }
  if (command === 'backup' && sub === 'verify') {
    const args = verifyArgs(argv.slice(2))
    if (!args) {
      process.stderr.write('usage: coffer backup verify <file|s3://bucket/key> [--scratch <dir>]\n')
      return 1
    }
    return backupVerify(config, args.target, args.scratch)
  }
  if (command === 'check') {
    if (argv.length > 1) {
      process.stderr.write('usage: coffer check\n')
      return 1
    }
    return checkCommand(config)
  }
  if (command === 'db' && (sub === 'encrypt' || sub === 'key')) {
    return dbCommand(config, sub, argv.slice(2))
  }
  process.stderr.write(`unknown command: ${argv.join(' ')}\n\n${USAGE}`)
  return 1
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code)
  },
  (error: unknown) => {
    if (error instanceof ConfigError || error instanceof EnvFileError)
      process.stderr.write(`${error.message}\n`)
    else process.stderr.write(`coffer: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  },
)
