import type { DatabaseConnection, Dialect, Driver, TransactionSettings } from 'kysely'

/** A connection a wrapping driver hands out, the wrapped driver's own inside it. */
export interface WrappedConnection extends DatabaseConnection {
  readonly inner: DatabaseConnection
}

type Compile = Parameters<NonNullable<Driver['savepoint']>>[2]

/**
 * What a wrapping driver (auditing-driver.ts, rights-driver.ts) passes straight through to the
 * driver it wraps, unwrapping the connection: the wrappers differ only in how they acquire a
 * connection and open, commit and roll back transactions.
 */
export abstract class PassThroughDriver implements Driver {
  constructor(protected readonly inner: Driver) {}

  abstract acquireConnection(): Promise<DatabaseConnection>
  abstract beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void>
  abstract commitTransaction(connection: DatabaseConnection): Promise<void>
  abstract rollbackTransaction(connection: DatabaseConnection): Promise<void>

  init(): Promise<void> {
    return this.inner.init()
  }

  savepoint(connection: DatabaseConnection, name: string, compile: Compile): Promise<void> {
    if (!this.inner.savepoint) throw new Error('savepoints are not supported')
    return this.inner.savepoint((connection as WrappedConnection).inner, name, compile)
  }

  rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: Compile,
  ): Promise<void> {
    if (!this.inner.rollbackToSavepoint) throw new Error('savepoints are not supported')
    return this.inner.rollbackToSavepoint((connection as WrappedConnection).inner, name, compile)
  }

  releaseSavepoint(connection: DatabaseConnection, name: string, compile: Compile): Promise<void> {
    if (!this.inner.releaseSavepoint) throw new Error('savepoints are not supported')
    return this.inner.releaseSavepoint((connection as WrappedConnection).inner, name, compile)
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection((connection as WrappedConnection).inner)
  }

  destroy(): Promise<void> {
    return this.inner.destroy()
  }
}

/** `dialect` with its driver or introspector replaced, everything else its own. */
export function wrapDialect(
  dialect: Dialect,
  replace: Partial<Pick<Dialect, 'createDriver' | 'createIntrospector'>>,
): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: replace.createIntrospector ?? ((db) => dialect.createIntrospector(db)),
    createDriver: replace.createDriver ?? (() => dialect.createDriver()),
  }
}
