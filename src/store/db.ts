import { createHash } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import SQLite from 'better-sqlite3-multiple-ciphers'
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely'
import { auditingDialect } from './auditing-driver.js'
import { deadlinePool } from './deadline-pool.js'
import { currentSchemaDialect } from './pg-introspector.js'
import { pgModule } from './pg-module.js'
import { PgRightsListener } from './pg-rights-listener.js'
import { pgConnection } from './pg-tls.js'
import { enableDirectReads } from './precompiled.js'
import { ReadPool } from './read-pool.js'
import { currentDeadline, isRollback } from './request-deadline.js'
import { rightsDialect } from './rights-driver.js'
import { RightsFeed } from './rights-feed.js'
import type { Database } from './schema.js'
import { applySqliteKey } from './sqlite-cipher.js'
import { sqliteWriteDialect } from './sqlite-write-driver.js'
import { cachingDatabase } from './statement-cache.js'
import { WalGroupSync } from './wal-sync.js'

/** Bytes the SQLite WAL file is cut back to once checkpointed (security review, finding 4). */
export const SQLITE_JOURNAL_SIZE_LIMIT = 32 * 1024 * 1024

/** Stands in for a ROLLBACK when SQLite has already rolled the transaction back. */
const NOTHING_TO_ROLL_BACK = 'select 0 where 0'

export type DialectName = 'sqlite' | 'postgres'

export interface Store {
  db: Kysely<Database>
  dialect: DialectName
  /** Tells caches of principals when a right may have changed (issue 21; rights-feed.ts). */
  rights: RightsFeed
  close(): Promise<void>
  /** PostgreSQL: the pool's open, idle and waiting counts (metrics); SQLite has no pool. */
  poolStats?: () => { total: number; idle: number; waiting: number }
  /** PostgreSQL: connections the pool may open (searches at once stay below it). */
  poolSize?: number
  /** SQLite file with read workers: the threads searches run on (read-pool.ts). */
  readPool?: ReadPool
  /** SQLite file: the WAL's group fsync off the event loop (wal-sync.ts; the audit trail's). */
  walSync?: WalGroupSync
}

export interface StoreOptions {
  /** `postgres://…` or a SQLite file path (`:memory:` for tests). */
  url: string
  /** PostgreSQL only: schema to use as search_path (tests isolate themselves this way). */
  pgSchema?: string
  /** PostgreSQL pool and timeouts (config.ts COFFER_PG_*); defaults: DEFAULT_PG_SETTINGS. */
  pg?: Partial<PgSettings>
  /** PostgreSQL: `application_name` of every connection (tests find their own backends by it). */
  pgApplicationName?: string
  /**
   * Told when a PostgreSQL connection fails outside a statement (terminated backend, failover,
   * dropped socket); the pool then replaces it. Default: one JSON line on stderr. The error
   * never holds the connection URL, so never its password.
   */
  onConnectionError?: (error: Error) => void
  /** SQLite: how long a statement waits for another connection's write lock (ms). */
  sqliteBusyTimeoutMs?: number
  /**
   * SQLite file: worker threads with read-only connections for searches (COFFER_SEARCH_WORKERS,
   * default DEFAULT_SEARCH_WORKERS; 0: searches run on the main connection). `:memory:` has
   * none: a worker's connection could not see that database.
   */
  sqliteReadWorkers?: number
  /** The read workers' module (tests swap in one they control). */
  sqliteReadWorkerUrl?: URL
  /**
   * SQLite file: its 32-byte file key (sqlite-cipher.ts; `coffer` unwraps it from the file's
   * key file, modules/keys/file-key.ts). Without one the file is plaintext: `:memory:`, the
   * conversion of an old file, the bench's "off" half.
   */
  sqliteKey?: Buffer
}

/** Read worker threads of a SQLite store: the machine this was built for has 2 cores. */
export const DEFAULT_SEARCH_WORKERS = 2

/** PostgreSQL pool size and timeouts, in milliseconds. */
export interface PgSettings {
  poolSize: number
  /** Longest wait for a new connection to be established. */
  connectTimeoutMs: number
  /** PostgreSQL's statement_timeout on every connection (0: none). */
  statementTimeoutMs: number
  /** An idle connection is closed after this (0: kept open). */
  idleTimeoutMs: number
}

export const DEFAULT_PG_SETTINGS: PgSettings = Object.freeze({
  poolSize: 10,
  connectTimeoutMs: 5000,
  statementTimeoutMs: 30_000,
  idleTimeoutMs: 30_000,
})

export const DEFAULT_SQLITE_BUSY_TIMEOUT_MS = 5000

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url)
}

export function openStore(options: StoreOptions): Store {
  return isPostgresUrl(options.url)
    ? openPostgres(options)
    : openSqlite(
        options.url,
        options.sqliteBusyTimeoutMs ?? DEFAULT_SQLITE_BUSY_TIMEOUT_MS,
        {
          threads: options.sqliteReadWorkers ?? DEFAULT_SEARCH_WORKERS,
          ...(options.sqliteReadWorkerUrl ? { workerUrl: options.sqliteReadWorkerUrl } : {}),
        },
        options.url === ':memory:' ? undefined : options.sqliteKey,
      )
}

function logConnectionError(error: Error): void {
  const code = (error as { code?: unknown }).code
  process.stderr.write(
    `${JSON.stringify({ level: 40, time: Date.now(), msg: 'database connection lost; the pool replaces it', error: error.message, ...(typeof code === 'string' ? { code } : {}) })}\n`,
  )
}

function openSqlite(
  file: string,
  busyTimeoutMs: number,
  reads: { threads: number; workerUrl?: URL },
  key: Buffer | undefined,
): Store {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true })
  const database = new SQLite(file)
  try {
    // The busy timeout first: the key check reads the schema, which may wait on another writer.
    database.pragma(`busy_timeout = ${busyTimeoutMs}`)
    applySqliteKey(database, key, file)
  } catch (error) {
    database.close()
    throw error
  }
  // Sorts and temporary tables stay in memory: SQLite's temp files are not encrypted, and a
  // spilled sort of indexed values would put them on disk in plaintext.
  if (key) database.pragma('temp_store = MEMORY')
  // WAL lets readers run beside the writer; FULL sync keeps acknowledged writes through power
  // loss (a HIPAA-grade store prefers durability over the last few percent of write speed).
  database.pragma('journal_mode = WAL')
  database.pragma('synchronous = FULL')
  database.pragma('foreign_keys = ON')
  // After a large write the WAL file would keep its size for good (a 147 MB one stayed after
  // one oversized document): once a checkpoint has emptied it, SQLite truncates it to this.
  database.pragma(`journal_size_limit = ${SQLITE_JOURNAL_SIZE_LIMIT}`)
  // Deleted rows are overwritten with zeros instead of left in free space: a deleted document's
  // indexed plaintext must not stay readable in the file (PostgreSQL: VACUUM, decisions.md).
  database.pragma('secure_delete = ON')
  const cached = cachingDatabase(database)
  // Every change this process makes is seen where it is made. Another process on the same file
  // (tools, tests; not a supported cluster) moves `data_version`: any commit of theirs empties
  // the caches before their next use (one cheap pragma, no disk read while nothing changed).
  const dataVersion = database.prepare('pragma data_version').pluck()
  let seenVersion = dataVersion.get()
  const rights = new RightsFeed({
    trusted: true,
    changedElsewhere: () => {
      let version: unknown
      try {
        version = dataVersion.get()
      } catch {
        return true // cannot tell (say, the connection is busy streaming): assume a change
      }
      if (version === seenVersion) return false
      seenVersion = version
      return true
    },
  })
  const db = new Kysely<Database>({
    dialect: rightsDialect(
      auditingDialect(sqliteWriteDialect(sqliteDialect(database, cached)), 'sqlite'),
      rights,
    ),
  })
  // Hot lookups (precompiled SELECTs) run here at once, unless a transaction is open: it holds
  // the one connection (its uncommitted rows must not be seen), so they queue behind it in
  // Kysely as before. Nothing else runs between the check and the read (both synchronous).
  enableDirectReads(db, (sql, parameters) => {
    if (database.inTransaction) return undefined
    currentDeadline()?.check()
    return cached.prepare(sql).all(parameters as unknown[]) as unknown[]
  })
  // Started once the file is in WAL mode: each worker opens it read-only.
  const readPool =
    file === ':memory:' || reads.threads === 0
      ? undefined
      : new ReadPool({ file, busyTimeoutMs, ...reads, ...(key ? { key } : {}) })
  const walSync = file === ':memory:' ? undefined : new WalGroupSync(`${file}-wal`)
  const close = async () => {
    await readPool?.close()
    await db.destroy()
    walSync?.close()
  }
  return {
    db,
    dialect: 'sqlite',
    rights,
    close,
    ...(readPool ? { readPool } : {}),
    ...(walSync ? { walSync } : {}),
  }
}

function sqliteDialect(
  database: SQLite.Database,
  cached: ReturnType<typeof cachingDatabase>,
): SqliteDialect {
  return new SqliteDialect({
    database: {
      close: () => cached.close(),
      // Statements run synchronously here, so none is ever interrupted: past the request's
      // deadline the next one is refused (a rollback excepted), which ends its transaction.
      prepare(sqlText) {
        if (!isRollback(sqlText)) currentDeadline()?.check()
        // SQLite rolls a transaction back by itself after some errors (SQLITE_FULL among
        // them): Kysely's own ROLLBACK would then fail and hide the cause (a full disk
        // answered 500 instead of 507). With no transaction open there is nothing to undo.
        else if (!database.inTransaction) return cached.prepare(NOTHING_TO_ROLL_BACK)
        return cached.prepare(sqlText)
      },
    },
  })
}

function openPostgres(options: StoreOptions): Store {
  const settings = { ...DEFAULT_PG_SETTINGS, ...options.pg }
  // TLS as the URL asks for it (sslmode, sslrootcert; pg-tls.ts), on every connection.
  const connection = pgConnection(options.url)
  const pg = pgModule()
  const pool = new pg.Pool({
    ...connection,
    max: settings.poolSize,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    idleTimeoutMillis: settings.idleTimeoutMs,
    statement_timeout: settings.statementTimeoutMs,
    ...(options.pgApplicationName ? { application_name: options.pgApplicationName } : {}),
    ...(options.pgSchema ? { options: `-c search_path=${options.pgSchema}` } : {}),
  })
  const onError = options.onConnectionError ?? logConnectionError
  // Every connection gets its own listener, idle or checked out: without one, a connection that
  // drops (terminated backend, failover, firewall) kills the process with an unhandled 'error'.
  // A statement running on it fails (503); the pool discards it and opens a new one on demand.
  pool.on('connect', (client) => client.on('error', (error) => onError(error)))
  // The pool re-emits an idle connection's error: already told above, but it needs a listener.
  pool.on('error', () => {})
  // A cancel goes through a connection of its own, not the pool: when every pooled connection
  // is waiting (say, on a lock), a cancel queued behind them would never run.
  const cancelBackend = async (pid: number) => {
    const client = new pg.Client({
      ...connection,
      connectionTimeoutMillis: settings.connectTimeoutMs,
    })
    client.on('error', () => {})
    await client.connect()
    try {
      await client.query('select pg_cancel_backend($1)', [pid])
    } finally {
      await client.end()
    }
  }
  // Nodes of one deployment share a schema, so they share its channel (a name of at most 63 bytes).
  const channel = `coffer_rights_${createHash('sha256')
    .update(options.pgSchema ?? '')
    .digest('hex')
    .slice(0, 16)}`
  let listener: PgRightsListener | undefined
  const rights = new RightsFeed({
    trusted: false,
    channel,
    start: () => {
      listener = new PgRightsListener(rights, {
        connection,
        channel,
        connectTimeoutMs: settings.connectTimeoutMs,
        onError,
        ...(options.pgApplicationName ? { applicationName: options.pgApplicationName } : {}),
      })
      listener.start()
    },
  })
  const db = new Kysely<Database>({
    dialect: rightsDialect(
      auditingDialect(
        currentSchemaDialect(new PostgresDialect({ pool: deadlinePool(pool, cancelBackend) })),
        'postgres',
      ),
      rights,
      channel,
    ),
  })
  return {
    db,
    dialect: 'postgres',
    rights,
    close: async () => {
      await listener?.close()
      await db.destroy()
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    poolSize: settings.poolSize,
  }
}
