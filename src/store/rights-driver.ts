import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
  type TransactionSettings,
} from 'kysely'
import { PassThroughDriver, type WrappedConnection, wrapDialect } from './pass-through-driver.js'
import { isRightsWrite, type RightsFeed } from './rights-feed.js'

interface Watched extends WrappedConnection {
  inTransaction: boolean
  /** A statement of the open transaction wrote to a rights table. */
  rightsChanged: boolean
}

/**
 * The one invalidation port (issue 21), in the store so no write path can forget it: a write to
 * a table cached principals are built from (rights-feed.ts `isRightsWrite`) tells the feed once
 * it has committed — after the commit, so a request cannot re-read the old rows after the clear
 * (and the feed's epoch turns away one that read them before). On PostgreSQL the write also
 * sends a NOTIFY on `channel` in its own transaction: delivered to every node on commit, never
 * for a rolled-back write. `channel` undefined: SQLite, one process, nothing to send.
 */
export function rightsDialect(dialect: Dialect, feed: RightsFeed, channel?: string): Dialect {
  return wrapDialect(dialect, {
    createDriver: () => new RightsDriver(dialect.createDriver(), feed, channel),
  })
}

class RightsDriver extends PassThroughDriver {
  constructor(
    inner: Driver,
    private readonly feed: RightsFeed,
    private readonly channel: string | undefined,
  ) {
    super(inner)
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await this.inner.acquireConnection()
    const driver = this
    const watched: Watched = {
      inner,
      inTransaction: false,
      rightsChanged: false,
      executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        if (!isRightsWrite(query.sql)) return inner.executeQuery<R>(query)
        if (watched.inTransaction) {
          watched.rightsChanged = true
          return inner.executeQuery<R>(query)
        }
        return driver.#loneWrite<R>(inner, query)
      },
      streamQuery: <R>(query: CompiledQuery, chunkSize?: number) =>
        inner.streamQuery<R>(query, chunkSize),
    }
    return watched
  }

  /**
   * A rights write outside a transaction. SQLite: it commits as it returns (a failed one changed
   * nothing). PostgreSQL: wrapped in a transaction with its notification, so the two commit
   * together — a connection lost between them would otherwise leave other nodes untold.
   */
  async #loneWrite<R>(inner: DatabaseConnection, query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.channel === undefined) {
      const result = await inner.executeQuery<R>(query)
      this.feed.changed()
      return result
    }
    await this.inner.beginTransaction(inner, {})
    let result: QueryResult<R>
    try {
      result = await inner.executeQuery<R>(query)
      await this.#notify(inner)
      await this.inner.commitTransaction(inner)
    } catch (error) {
      await this.inner.rollbackTransaction(inner).catch(() => undefined)
      throw error
    }
    this.feed.changed()
    this.feed.sent()
    return result
  }

  /** Sends the notification (PostgreSQL); whether there was one to send. */
  async #notify(connection: DatabaseConnection): Promise<boolean> {
    if (this.channel === undefined) return false
    await connection.executeQuery(CompiledQuery.raw('select pg_notify($1, $2)', [this.channel, '']))
    return true
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const watched = connection as Watched
    watched.inTransaction = true
    watched.rightsChanged = false
    return this.inner.beginTransaction(watched.inner, settings)
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const watched = connection as Watched
    const changed = watched.rightsChanged
    watched.rightsChanged = false
    // In the transaction: PostgreSQL delivers it on commit, to every listening node.
    const notified = changed && (await this.#notify(watched.inner))
    watched.inTransaction = false
    await this.inner.commitTransaction(watched.inner)
    if (changed) this.feed.changed()
    if (notified) this.feed.sent()
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const watched = connection as Watched
    watched.inTransaction = false
    watched.rightsChanged = false
    return this.inner.rollbackTransaction(watched.inner)
  }
}
