import { CompiledQuery, type Kysely, sql } from 'kysely'
import { type Meter, noopMeter } from '../metrics/meter.js'
import { outsideDeadline } from '../store/request-deadline.js'
import type { Database } from '../store/schema.js'
import type { WalGroupSync } from '../store/wal-sync.js'
import {
  appendPredictedPg,
  appendToChains,
  type ChainDialect,
  type ChainHead,
  chainAfter,
} from './chain.js'
import { outsideAudit } from './context.js'
import type { AuditEventInput, ChainedEvent } from './event.js'

/** Most events one group-commit transaction stores (bounds its statement: 22 values each). */
export const AUDIT_BATCH_MAX = 256

/**
 * PostgreSQL: accounts whose chain head a node predicts (one small entry each); past it the
 * predictions start afresh (each account's next batch then takes the locked path once).
 */
export const AUDIT_PREDICTED_HEADS_MAX = 10_000

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
 * that arrive while it is stored wait for the next batch (one flush at a time; on PostgreSQL
 * its accounts are appended side by side, each in one round trip when its head is predicted;
 * on a SQLite file the next batch commits while the last one's WAL sync runs). A request's
 * answer waits for its batch; a failed batch fails every request of its account (503
 * AUDIT_UNAVAILABLE).
 */
export class AuditWriter {
  readonly #queue: Pending[] = []
  /** Flushes running now: at most one (a batch forms while the one before is stored). */
  #active = 0
  readonly #listeners: AuditListener[] = []
  #closed = false

  /** PostgreSQL: batches appended in one round trip after a predicted head, or under the lock. */
  readonly appendPaths = { predicted: 0, locked: 0 }
  /** PostgreSQL: where this node expects each account's chain to end (#appendPg). */
  readonly #heads = new Map<string, ChainHead>()
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
  ) {}

  /** Another listener is told after each stored batch and write (best effort, never awaited). */
  onStored(listener: AuditListener): void {
    this.#listeners.push(listener)
  }

  /** Told by the store when an event was appended with its write. */
  stored(events: readonly ChainedEvent[]): void {
    this.#predictAfter(events)
    this.#tell(events)
  }

  /** The chain heads the next PostgreSQL batches predict from: each account's last event. */
  #predictAfter(events: readonly ChainedEvent[]): void {
    if (this.dialect !== 'postgres') return
    if (this.#heads.size >= AUDIT_PREDICTED_HEADS_MAX) this.#heads.clear()
    for (const e of events) this.#heads.set(e.accountId, { seq: e.seq, hash: e.hash })
  }

  /** The batch's accounts side by side: a failure fails only that account's requests. */
  async #flushPg(batch: readonly Pending[]): Promise<void> {
    const byAccount = new Map<string, Pending[]>()
    for (const p of batch) {
      const list = byAccount.get(p.event.accountId)
      if (list) list.push(p)
      else byAccount.set(p.event.accountId, [p])
    }
    await Promise.all(
      [...byAccount].map(async ([accountId, pending]) => {
        try {
          const events = pending.map((p) => p.event)
          this.#stored(pending, await this.#appendPg(accountId, events))
        } catch (error) {
          this.#failed(pending, error)
        }
      }),
    )
  }

  /**
   * One round trip when this node knows where the account's chain ends (audit/chain.ts
   * appendPredictedPg); else, or when the head has moved, the locked transaction.
   */
  async #appendPg(accountId: string, events: AuditEventInput[]): Promise<ChainedEvent[]> {
    const predicted = this.#heads.get(accountId)
    if (predicted) {
      const rows = chainAfter(predicted, events)
      this.#predictAfter(rows.slice(-1))
      if (await appendPredictedPg(execOn(this.db), predicted, rows)) {
        this.appendPaths.predicted++
        return rows
      }
    }
    this.appendPaths.locked++
    const stored = await this.db
      .transaction()
      .execute((trx) => appendToChains(execOn(trx), 'postgres', events))
    this.#predictAfter(stored.slice(-1))
    return stored
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
    if (this.#active === 0) {
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
        if (this.dialect === 'postgres') {
          await this.#flushPg(batch)
          continue
        }
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
   * SQLite: one transaction. It begins IMMEDIATE: it reads the chain head, then writes, and a
   * deferred one would meet another process's writer with SQLITE_BUSY at once instead of
   * waiting its busy_timeout. With `walSync` it commits under `synchronous = NORMAL` (no fsync
   * on the event loop; the caller waits for the WAL's fdatasync), FULL again before the
   * connection is let go: nothing else commits on it in between (Kysely lends it to one user).
   */
  async #store(events: AuditEventInput[]): Promise<ChainedEvent[]> {
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
