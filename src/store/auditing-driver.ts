import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
  type TransactionSettings,
} from 'kysely'
import type { Exec } from '../audit/chain.js'
import { appendWithWrite, auditPending, isUnauditedWrite, isWrite } from '../audit/context.js'
import { PassThroughDriver, type WrappedConnection, wrapDialect } from './pass-through-driver.js'

/** Which engine (db.ts DialectName; not imported: db.ts imports this file). */
type DialectName = 'sqlite' | 'postgres'

interface Tracked extends WrappedConnection {
  inTransaction: boolean
  wrote: boolean
}

function execOn(connection: DatabaseConnection): Exec {
  return async (text, params) =>
    (await connection.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, [...params])))
      .rows
}

/**
 * The audit trail's hook in the store (issue 13): a request's event is appended in the same
 * transaction as its write, right before the commit, so an event that cannot be stored fails
 * the commit and the write rolls back. Statements are watched on their connection: a
 * transaction that wrote appends the event of the request it runs for (AsyncLocalStorage,
 * audit/context.ts); a lone write statement outside a transaction is wrapped in one. Counter
 * bookkeeping (login windows) and the trail's own tables carry no event.
 */
export function auditingDialect(dialect: Dialect, name: DialectName): Dialect {
  return wrapDialect(dialect, {
    createDriver: () => new AuditingDriver(dialect.createDriver(), name),
  })
}

class AuditingDriver extends PassThroughDriver {
  constructor(
    inner: Driver,
    private readonly dialect: DialectName,
  ) {
    super(inner)
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await this.inner.acquireConnection()
    const driver = this
    const tracked: Tracked = {
      inner,
      inTransaction: false,
      wrote: false,
      executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        if (!isWrite(query.sql) || isUnauditedWrite(query.sql)) return inner.executeQuery<R>(query)
        if (tracked.inTransaction) {
          tracked.wrote = true
          return inner.executeQuery<R>(query)
        }
        if (!auditPending()) return inner.executeQuery<R>(query)
        return driver.#loneWrite<R>(inner, query)
      },
      streamQuery: <R>(query: CompiledQuery, chunkSize?: number) =>
        inner.streamQuery<R>(query, chunkSize),
    }
    return tracked
  }

  /** A write statement outside a transaction, while a request's event waits: in one, with it. */
  async #loneWrite<R>(inner: DatabaseConnection, query: CompiledQuery): Promise<QueryResult<R>> {
    const exec = execOn(inner)
    await this.inner.beginTransaction(inner, {})
    let after: (() => void) | undefined
    let result: QueryResult<R>
    try {
      result = await inner.executeQuery<R>(query)
      after = await appendWithWrite(exec, this.dialect)
      await this.inner.commitTransaction(inner)
    } catch (error) {
      await this.inner.rollbackTransaction(inner).catch(() => undefined)
      throw error
    }
    after?.()
    return result
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const tracked = connection as Tracked
    tracked.inTransaction = true
    tracked.wrote = false
    return this.inner.beginTransaction(tracked.inner, settings)
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const tracked = connection as Tracked
    const after = tracked.wrote
      ? await appendWithWrite(execOn(tracked.inner), this.dialect)
      : undefined
    tracked.inTransaction = false
    await this.inner.commitTransaction(tracked.inner)
    after?.()
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const tracked = connection as Tracked
    tracked.inTransaction = false
    return this.inner.rollbackTransaction(tracked.inner)
  }
}
