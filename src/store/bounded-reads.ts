import type { CompiledQuery } from 'kysely'
import { BoundedGate, GateFullError } from '../lib/bounded-gate.js'
import { type QueryBound, QueryStopped, runBounded } from './bounded-query.js'
import type { Executor } from './executor.js'
import type { ReadPool, ReadResult } from './read-pool.js'

export { ReadPoolUnavailable } from './read-pool.js'

/** Refused before it ran: every slot and queue place is taken (or too many stops still end). */
export class ReadsBusy extends Error {
  constructor() {
    super('every search slot and queue place is taken')
    this.name = 'ReadsBusy'
  }
}

export interface ReadLimits {
  /** Reads running at once on this node (SQLite: the pool's threads). */
  concurrency: number
  /** Reads waiting for a slot; one more is refused at once (ReadsBusy). */
  queue: number
}

/**
 * Where heavy reads (searches) run, and how many at once (issue 14). Callers hand over compiled
 * queries (SQL text + parameters) and get their rows back, so the SQL is never this file's
 * business. Each call:
 *  - waits for one of `concurrency` slots, behind at most `queue` others (else ReadsBusy): on
 *    PostgreSQL this keeps searches from holding every pooled connection, so other requests
 *    always find one; on SQLite it matches the pool's threads;
 *  - runs under its bound: `timeoutMs` counts from the call (queueing included), the signal
 *    stops it when its client has gone; a stop is QueryStopped.
 * Where the queries run: on PostgreSQL in one transaction with statement_timeout (bounded-query);
 * on a SQLite file in a worker thread of the read pool (read-pool.ts), all in one read
 * transaction, the worker terminated when stopped; on SQLite without a pool (`:memory:`, or
 * COFFER_SEARCH_WORKERS=0) inline on the main connection, where nothing can interrupt them.
 */
export class BoundedReads {
  readonly #gate: BoundedGate

  constructor(
    private readonly db: Executor,
    limits: ReadLimits,
    private readonly pool?: ReadPool,
  ) {
    this.#gate = new BoundedGate(limits.concurrency, limits.queue)
  }

  /** Running and waiting reads now (tests, metrics). */
  load(): { running: number; queued: number } {
    return this.#gate.load()
  }

  /** The rows of each query, in order; unbounded without `bound` (tools, bench). */
  async run(queries: readonly CompiledQuery[], bound?: QueryBound): Promise<ReadResult> {
    if (!bound) return this.#gate.run(() => inline(this.db, queries))
    const { signal } = bound
    if (signal?.aborted) throw new QueryStopped('aborted')
    const started = Date.now()
    const timeout = new AbortController()
    const timer = setTimeout(() => timeout.abort(), bound.timeoutMs)
    const stop = signal ? AbortSignal.any([timeout.signal, signal]) : timeout.signal
    const reason = () => (signal?.aborted ? 'aborted' : 'timeout')
    try {
      return await this.#gate.run(async () => {
        if (this.pool) return await this.#onPool(queries, stop, reason)
        // What is left of the bound after the wait for a slot.
        const left = Math.max(1, bound.timeoutMs - (Date.now() - started))
        return await runBounded(
          this.db,
          { timeoutMs: left, ...(signal ? { signal } : {}) },
          (conn) => inline(conn, queries),
        )
      }, stop)
    } catch (e) {
      if (e instanceof GateFullError) throw new ReadsBusy()
      if (stop.aborted && !(e instanceof QueryStopped))
        throw new QueryStopped(reason(), { cause: e })
      throw e
    } finally {
      clearTimeout(timer)
    }
  }

  async #onPool(
    queries: readonly CompiledQuery[],
    stop: AbortSignal,
    reason: () => 'aborted' | 'timeout',
  ): Promise<ReadResult> {
    const pool = this.pool as ReadPool
    // Stopped reads whose statements still run hold a core each: past as many as the pool has
    // threads, refuse more rather than pile up threads nothing can stop.
    // A failed pool answers at once with ReadPoolUnavailable (its ended threads are not stops).
    if (pool.failure() === undefined && pool.abandoned() >= pool.options.threads)
      throw new ReadsBusy()
    const plain = queries.map((q) => ({ sql: q.sql, parameters: [...q.parameters] }))
    try {
      return await pool.run(plain, stop)
    } catch (e) {
      if (stop.aborted) throw new QueryStopped(reason(), { cause: e })
      throw e
    }
  }
}

/**
 * The queries on `db` itself, no slots, no pool (tools, tests of the SQL): under runBounded when
 * given a bound.
 */
export function runOnConnection(
  db: Executor,
  queries: readonly CompiledQuery[],
  bound?: QueryBound,
): Promise<ReadResult> {
  return bound ? runBounded(db, bound, (conn) => inline(conn, queries)) : inline(db, queries)
}

/**
 * One after the other on `db`: on PostgreSQL inside runBounded's transaction, on SQLite each
 * runs synchronously, so nothing commits between them either way.
 */
async function inline(db: Executor, queries: readonly CompiledQuery[]): Promise<ReadResult> {
  const results: ReadResult = []
  for (const q of queries) results.push((await db.executeQuery<Record<string, unknown>>(q)).rows)
  return results
}
