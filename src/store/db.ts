import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely'
import pg from 'pg'
import type { Database } from './schema.js'
import { cachingDatabase } from './statement-cache.js'

/** Bytes the SQLite WAL file is cut back to once checkpointed (security review, finding 4). */
export const SQLITE_JOURNAL_SIZE_LIMIT = 32 * 1024 * 1024

export type DialectName = 'sqlite' | 'postgres'

export interface Store {
  db: Kysely<Database>
  dialect: DialectName
  close(): Promise<void>
  /** PostgreSQL: the pool's open, idle and waiting counts (metrics); SQLite has no pool. */
  poolStats?: () => { total: number; idle: number; waiting: number }
}

export interface StoreOptions {
  /** `postgres://…` or a SQLite file path (`:memory:` for tests). */
  url: string
  /** PostgreSQL only: schema to use as search_path (tests isolate themselves this way). */
  pgSchema?: string
  pgPoolSize?: number
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url)
}

export function openStore(options: StoreOptions): Store {
  return isPostgresUrl(options.url) ? openPostgres(options) : openSqlite(options.url)
}

function openSqlite(file: string): Store {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true })
  const database = new SQLite(file)
  // WAL lets readers run beside the writer; FULL sync keeps acknowledged writes through power
  // loss (a HIPAA-grade store prefers durability over the last few percent of write speed).
  database.pragma('journal_mode = WAL')
  database.pragma('synchronous = FULL')
  database.pragma('foreign_keys = ON')
  database.pragma('busy_timeout = 5000')
  // After a large write the WAL file would keep its size for good (a 147 MB one stayed after
  // one oversized document): once a checkpoint has emptied it, SQLite truncates it to this.
  database.pragma(`journal_size_limit = ${SQLITE_JOURNAL_SIZE_LIMIT}`)
  // Deleted rows are overwritten with zeros instead of left in free space: a deleted document's
  // indexed plaintext must not stay readable in the file (PostgreSQL: VACUUM, decisions.md).
  database.pragma('secure_delete = ON')
  const db = new Kysely<Database>({
    dialect: new SqliteDialect({ database: cachingDatabase(database) }),
  })
  return { db, dialect: 'sqlite', close: () => db.destroy() }
}

function openPostgres(options: StoreOptions): Store {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.pgPoolSize ?? 10,
    ...(options.pgSchema ? { options: `-c search_path=${options.pgSchema}` } : {}),
  })
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  return {
    db,
    dialect: 'postgres',
    close: () => db.destroy(),
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
  }
}
