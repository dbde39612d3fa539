import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type QueryResult,
  type TransactionSettings,
} from 'kysely'
import { PassThroughDriver, type WrappedConnection, wrapDialect } from './pass-through-driver.js'

/**
 * SQLite: every transaction begins IMMEDIATE, taking the write lock at its BEGIN — except one
 * begun read only (`setAccessMode('read only')`), which stays deferred.
 *
 * Kysely begins a deferred transaction, which takes the lock at its first write. In WAL mode a
 * deferred transaction that has already read cannot wait for the lock: SQLite invokes the busy
 * handler only for a connection that holds no read snapshot, so it fails at once with
 * SQLITE_BUSY while another connection (another process, the CLI) writes, and with
 * SQLITE_BUSY_SNAPSHOT when one committed since its first read — a 503 DATABASE_UNAVAILABLE
 * that busy_timeout was meant to absorb. Taken at BEGIN, the wait is busy_timeout's.
 */
export function sqliteWriteDialect(dialect: Dialect): Dialect {
  return wrapDialect(dialect, { createDriver: () => new SqliteWriteDriver(dialect.createDriver()) })
}

const BEGIN_IMMEDIATE = CompiledQuery.raw('begin immediate')
const BEGIN_DEFERRED = CompiledQuery.raw('begin')

class SqliteWriteDriver extends PassThroughDriver {
  async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await this.inner.acquireConnection()
    const connection: WrappedConnection = {
      inner,
      executeQuery: <R>(query: CompiledQuery): Promise<QueryResult<R>> =>
        inner.executeQuery<R>(query),
      streamQuery: <R>(query: CompiledQuery, chunkSize?: number) =>
        inner.streamQuery<R>(query, chunkSize),
    }
    return connection
  }

  async beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void> {
    // A read-only one (a backup's snapshot, audit verify) stays deferred: it never writes, and
    // holding the write lock for its length would stall every writer of the server behind it.
    await (connection as WrappedConnection).inner.executeQuery(
      settings.accessMode === 'read only' ? BEGIN_DEFERRED : BEGIN_IMMEDIATE,
    )
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction((connection as WrappedConnection).inner)
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.rollbackTransaction((connection as WrappedConnection).inner)
  }
}
