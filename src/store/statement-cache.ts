import type BetterSqlite3 from 'better-sqlite3-multiple-ciphers'
import type { SqliteDatabase, SqliteStatement } from 'kysely'

/**
 * How much the cache may hold. A prepared statement's memory grows with its SQL (each term is
 * compiled into SQLite's program), so SQL length is the measure: 300 distinct searches with long
 * `in` lists once held 2.5 GB in 512 entries (security review, finding 5).
 */
export interface StatementCacheLimits {
  /** Most statements kept. */
  capacity: number
  /** Longer SQL is prepared for its one use and never kept. */
  maxSqlLength: number
  /** Most SQL characters kept, all statements together: the least recently used go first. */
  totalSqlLength: number
}

export const DEFAULT_STATEMENT_CACHE: StatementCacheLimits = {
  capacity: 512,
  maxSqlLength: 16 * 1024,
  totalSqlLength: 2 * 1024 * 1024,
}

/**
 * Kysely's SQLite driver prepares every query's SQL again on each execution, which was the
 * largest single cost of an authenticated read. This wrapper keeps the most recently used
 * prepared statements, bounded in count and in total SQL length (see StatementCacheLimits).
 */
export function cachingDatabase(
  database: BetterSqlite3.Database,
  limits: Partial<StatementCacheLimits> = {},
): SqliteDatabase {
  const { capacity, maxSqlLength, totalSqlLength } = { ...DEFAULT_STATEMENT_CACHE, ...limits }
  const cache = new Map<string, SqliteStatement>()
  let held = 0
  return {
    close: () => database.close(),
    prepare(sql: string): SqliteStatement {
      const hit = cache.get(sql)
      if (hit) {
        // Refresh its place so the least recently used statement is evicted first.
        cache.delete(sql)
        cache.set(sql, hit)
        return hit
      }
      const statement = database.prepare(sql) as unknown as SqliteStatement
      if (sql.length > maxSqlLength) return statement
      cache.set(sql, statement)
      held += sql.length
      while (cache.size > capacity || held > totalSqlLength) {
        const oldest = cache.keys().next().value as string
        cache.delete(oldest)
        held -= oldest.length
      }
      return statement
    },
  }
}
