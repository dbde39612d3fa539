import { PostgresAdapter, sql } from 'kysely'
import type { Executor } from './executor.js'

/** How long a bounded query may run, and the signal that ends it early (its client left). */
export interface QueryBound {
  /** PostgreSQL's statement_timeout for each statement, in milliseconds. */
  timeoutMs: number
  signal?: AbortSignal
}

/** A bounded query stopped: by its time bound, or because its signal aborted. */
export class QueryStopped extends Error {
  constructor(
    readonly reason: 'timeout' | 'aborted',
    options?: { cause?: unknown },
  ) {
    super(reason === 'timeout' ? 'query ran past its time bound' : 'query cancelled', options)
    this.name = 'QueryStopped'
  }
}

/** SQLSTATE query_canceled: raised for statement_timeout and for pg_cancel_backend alike. */
const QUERY_CANCELED = '57014'

const isCanceled = (e: unknown) =>
  typeof e === 'object' && e !== null && (e as { code?: unknown }).code === QUERY_CANCELED

/**
 * Runs `work` so that a slow statement cannot hold a PostgreSQL backend (and a pool connection)
 * for long: on one connection, in a transaction whose `statement_timeout` is the bound, and
 * cancelled with `pg_cancel_backend` when the signal aborts (without it a query keeps running
 * for minutes after its client has gone). The cancel is sent only while this connection is
 * still ours, and awaited before the connection goes back to the pool, so it can never hit
 * another request's statement.
 *
 * SQLite runs statements synchronously in this process: nothing can interrupt one from here
 * (better-sqlite3 offers no interrupt), so there the bound is only that no work starts once the
 * signal has aborted; callers keep SQLite's statements cheap by construction.
 */
export async function runBounded<T>(
  db: Executor,
  bound: QueryBound,
  work: (conn: Executor) => Promise<T>,
): Promise<T> {
  const { signal } = bound
  if (signal?.aborted) throw new QueryStopped('aborted')
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return work(db)
  try {
    return await db.transaction().execute(async (trx) => {
      const { rows } = await sql<{
        pid: number
      }>`select pg_backend_pid() as pid, set_config('statement_timeout', ${String(bound.timeoutMs)}, true)`.execute(
        trx,
      )
      const pid = rows[0]?.pid
      let cancelling: Promise<unknown> | undefined
      // Through the pool, not `trx`: this connection is busy with the statement to cancel.
      const cancel = () => {
        cancelling = sql`select pg_cancel_backend(${pid})`.execute(db).catch(() => undefined)
      }
      signal?.addEventListener('abort', cancel, { once: true })
      try {
        if (signal?.aborted) throw new QueryStopped('aborted')
        return await work(trx)
      } finally {
        signal?.removeEventListener('abort', cancel)
        await cancelling
      }
    })
  } catch (e) {
    if (e instanceof QueryStopped) throw e
    if (isCanceled(e)) throw new QueryStopped(signal?.aborted ? 'aborted' : 'timeout', { cause: e })
    throw e
  }
}
