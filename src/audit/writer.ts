import { CompiledQuery, type Kysely, sql } from 'kysely'
import { type Meter, noopMeter } from '../metrics/meter.js'
import { outsideDeadline } from '../store/request-deadline.js'
import type { Database } from '../store/schema.js'
import type { WalGroupSync } from '../store/wal-sync.js'
import { appendToChains, type ChainDialect } from './chain.js'
import { outsideAudit } from './context.js'
import type { AuditEventInput, ChainedEvent } from './event.js'

/** Most events one group-commit transaction stores (bounds its statement: 22 values each). */
export const AUDIT_BATCH_MAX = 256

/**
 * PostgreSQL: flushes that may run at once. They meet at the chain heads' row locks, but each
 * one's round trips (begin, lock, insert, commit and its fsync) overlap the others' instead of
 * queueing behind them. SQLite has one connection and one writer: one flush.
 */
export const AUDIT_FLUSHES_MAX_PG = 4

/** Told of every event once it is stored (the optional streaming copy, audit/sink.ts). */
export type AuditListener = (events: readonly ChainedEvent[]) => void

const execOn =
  (db: Kysely<Database>) =>
  async (text: string, params: readonly unknown[]): Promise<Record<string, unknown>[]> =>
    (await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, [...params]))).rows

/** Told once an event is stored (no argument) or not (the cause). */
export type AppendCallback = (error?: unknown) => void

interface Pending {
  event: AuditEventInput
  done: AppendCallback
}

/**
 * The trail was closed (`close()`, at shutdown before the store): an event appended after it is
 * refused at once, without touching the database.
 */
export class AuditWriterClosed extends Error {
  constructor() {
    super('the audit trail is closed')
    this.name = 'AuditWriterClosed'
  }
}

/**
 * Group commit (issue 13): events of requests that wrote nothing — reads, refusals, errors —
 * are stored several per transaction. A flush takes up to AUDIT_BATCH_MAX queued events; events
 * that arrive while every flush is busy wait for the next batch (one flush at a time on SQLite,
 * AUDIT_FLUSHES_MAX_PG on PostgreSQL). A request's answer waits for
 * its batch; a failed batch fails every request in it (503 AUDIT_UNAVAILABLE).
 */
export class AuditWriter {
  readonly #queue: Pending[] = []
  /** Flushes running now (at most #maxFlushes). */
  #active = 0
  readonly #listeners: AuditListener[] = []
  #closed = false

  readonly #maxFlushes: number
  /** SQLite batches committed, their WAL fdatasync not yet done (relaxed commits only). */
  #syncing = 0

  /**
   * `walSync` (a SQLite file): batches commit without SQLite's in-commit fsync and are answered
   * after the WAL's group fdatasync, off the event loop (store/wal-sync.ts). Without it (PostgreSQL,
   * `:memory:`, the CLI's few events) each commit is durable by itself.
   */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: ChainDialect,
    private readonly meter: Meter = noopMeter,
    private readonly walSync?: WalGroupSync,
  ) {
    this.#maxFlushes = dialect === 'postgres' ? AUDIT_FLUSHES_MAX_PG : 1
  }

  /** Another listener is told after each stored batch and write (best effort, never awaited). */
  onStored(listener: AuditListener): void {
    this.#listeners.push(listener)
  }

  /** Told by the store when an event was appended with its write. */
  stored(events: readonly ChainedEvent[]): void {
    this.#tell(events)
  }

  append(event: AuditEventInput): Promise<void> {
    return new Promise((resolve, reject) =>
      this.enqueue(event, (error) => (error === undefined ? resolve() : reject(error))),
    )
  }

  /** `append` with a callback (the HTTP hook's hot path: no promise per request). */
  enqueue(event: AuditEventInput, done: AppendCallback): void {
    if (this.#closed) {
      this.meter.count('audit_appends', { outcome: 'failed', path: 'batch' })
      done(new AuditWriterClosed())
      return
    }
    this.#queue.push({ event, done })
    if (this.#active < this.#maxFlushes) {
      this.#active++
      // Not in the context of the request that started it: the flush serves many requests,
      // and must not end at that one's deadline or carry its audit state.
      outsideAudit(() => outsideDeadline(() => setImmediate(() => void this.#flush())))
    }
  }

  /**
   * At shutdown, before the store closes: what is queued is stored, then every later append is
   * refused with AuditWriterClosed (the pool it would need is about to close).
   */
  async close(): Promise<void> {
    this.#closed = true
    await this.idle()
  }

  /** Resolves once everything queued so far is stored (or failed). */
  async idle(): Promise<void> {
    while (this.#active > 0 || this.#syncing > 0) await new Promise((r) => setTimeout(r, 5))
  }

  async #flush(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, AUDIT_BATCH_MAX)
        let stored: ChainedEvent[]
        try {
          stored = await this.#store(batch.map((p) => p.event))
        } catch (error) {
          this.#failed(batch, error)
          continue
        }
        if (!this.walSync) {
          this.#stored(batch, stored)
          continue
        }
        // Answered once on disk; the next batch commits meanwhile and shares a later sync.
        this.#syncing++
        this.walSync
          .sync()
          .then(
            () => this.#stored(batch, stored),
            (error: unknown) => this.#failed(batch, error),
          )
          .finally(() => this.#syncing--)
      }
    } finally {
      this.#active--
    }
  }

  #stored(batch: readonly Pending[], stored: readonly ChainedEvent[]): void {
    this.meter.count('audit_appends', { outcome: 'ok', path: 'batch' }, batch.length)
    for (const p of batch) p.done()
    this.#tell(stored)
  }

  #failed(batch: readonly Pending[], error: unknown): void {
    this.meter.count('audit_appends', { outcome: 'failed', path: 'batch' }, batch.length)
    for (const p of batch) p.done(error ?? new Error('audit batch failed'))
  }

  /**
   * One transaction. On SQLite it begins IMMEDIATE: it reads the chain head, then writes, and a
   * deferred one would meet another process's writer with SQLITE_BUSY at once instead of
   * waiting its busy_timeout. With `walSync` it commits under `synchronous = NORMAL` (no fsync
   * on the event loop; the caller waits for the WAL's fdatasync), FULL again before the
   * connection is let go: nothing else commits on it in between (Kysely lends it to one user).
   */
  async #store(events: AuditEventInput[]): Promise<ChainedEvent[]> {
    if (this.dialect === 'postgres') {
      return this.db.transaction().execute((trx) => appendToChains(execOn(trx), 'postgres', events))
    }
    return this.db.connection().execute(async (conn) => {
      if (this.walSync) await sql`pragma synchronous = NORMAL`.execute(conn)
      try {
        await sql`begin immediate`.execute(conn)
        try {
          const stored = await appendToChains(execOn(conn), 'sqlite', events)
          await sql`commit`.execute(conn)
          return stored
        } catch (error) {
          await sql`rollback`.execute(conn).catch(() => undefined)
          throw error
        }
      } finally {
        if (this.walSync) await sql`pragma synchronous = FULL`.execute(conn)
      }
    })
  }

  #tell(events: readonly ChainedEvent[]): void {
    for (const listener of this.#listeners) {
      try {
        listener(events)
      } catch {
        // The copy is best effort: the database holds every event.
      }
    }
  }
}
