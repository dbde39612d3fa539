import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely'
import type pg from 'pg'
import { errors } from '../lib/errors.js'
import { currentDeadline, type Deadline, isRollback } from './request-deadline.js'

/** Stops the statement running on the backend with this pid (on a connection of its own). */
export type CancelBackend = (pid: number) => Promise<void>

/**
 * The pool Kysely uses on PostgreSQL, holding each request to its deadline
 * (store/request-deadline.ts): past it, no connection is handed out and no statement is sent
 * (a rollback excepted, so a transaction undoes its writes), and a statement still running when
 * it passes is cancelled. The statement's error then becomes 503 REQUEST_TIMEOUT, and Kysely
 * rolls its transaction back: a request past its deadline never commits.
 */
export function deadlinePool(pool: pg.Pool, cancelBackend: CancelBackend): PostgresPool {
  return {
    async connect() {
      const deadline = currentDeadline()
      deadline?.check()
      const client = await pool.connect()
      if (deadline?.expired) {
        client.release()
        deadline.check()
      }
      return guarded(client, cancelBackend)
    },
    end: () => pool.end(),
  }
}

function guarded(client: pg.PoolClient, cancelBackend: CancelBackend): PostgresPoolClient {
  function query<R>(
    text: string,
    parameters: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>>
  function query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>
  function query<R>(
    textOrCursor: string | PostgresCursor<R>,
    parameters?: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    if (typeof textOrCursor !== 'string') {
      currentDeadline()?.check()
      return client.query(textOrCursor as never) as PostgresCursor<R>
    }
    const deadline = currentDeadline()
    const run = () =>
      client.query(textOrCursor, parameters as unknown[]) as unknown as Promise<
        PostgresQueryResult<R>
      >
    if (!deadline || isRollback(textOrCursor)) return run()
    return withinDeadline(deadline, client, cancelBackend, run)
  }
  return { query, release: () => client.release() }
}

async function withinDeadline<T>(
  deadline: Deadline,
  client: pg.PoolClient,
  cancelBackend: CancelBackend,
  run: () => Promise<T>,
): Promise<T> {
  deadline.check()
  const pid = (client as unknown as { processID: number | null }).processID
  let cancelling: Promise<void> | undefined
  const cancel = () => {
    if (pid !== null) cancelling = cancelBackend(pid).catch(() => undefined)
  }
  deadline.signal.addEventListener('abort', cancel, { once: true })
  try {
    return await run()
  } catch (e) {
    // Cancelled by the deadline (57014), or failed for any reason once past it: either way the
    // request is over, and the caller's transaction rolls back.
    if (deadline.expired) throw errors.requestTimeout(deadline.timeoutMs, e)
    throw e
  } finally {
    deadline.signal.removeEventListener('abort', cancel)
    // Awaited before this connection runs anything else: a late cancel never hits the next
    // statement (of this request's rollback, or of another request once released).
    await cancelling
  }
}
