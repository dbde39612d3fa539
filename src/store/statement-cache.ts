import type BetterSqlite3 from 'better-sqlite3'
import type { SqliteDatabase, SqliteStatement } from 'kysely'

/**
 * Kysely's SQLite driver prepares every query's SQL again on each execution, which was the
 * largest single cost of an authenticated read. This wrapper keeps the most recent prepared
 * statements (bounded: `in (…)` lists of varying length produce distinct SQL).
 */
export function cachingDatabase(database: BetterSqlite3.Database, capacity = 512): SqliteDatabase {
  const cache = new Map<string, SqliteStatement>()
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
      cache.set(sql, statement)
      if (cache.size > capacity) cache.delete(cache.keys().next().value as string)
      return statement
    },
  }
}
