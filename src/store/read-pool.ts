import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Worker } from 'node:worker_threads'
import { Piscina } from 'piscina'
import type { ReadOutcome, ReadQuery, ReadWorkerData } from './read-worker.js'

/** Rows of each query, in order. */
export type ReadResult = Record<string, unknown>[][]

export interface ReadPoolOptions {
  /** The SQLite file (never `:memory:`: a worker's connection could not see it). */
  file: string
  /** Worker threads, each with one read-only connection (COFFER_SEARCH_WORKERS). */
  threads: number
  busyTimeoutMs: number
  /** The worker module (tests swap in one they control); default read-worker. */
  workerUrl?: URL
  /** After its workers failed to start, how long reads are refused before a fresh start. */
  retryMs?: number
  /** The file key of an encrypted file (sqlite-cipher.ts): each worker's connection uses it. */
  key?: Buffer
}

/** How long a pool whose workers could not start refuses reads before trying again. */
export const READ_POOL_RETRY_MS = 5000

/**
 * The pool has no working thread: its workers failed to start (a worker module or SQLite file
 * that cannot be opened) or a thread died under its read. Refused at once instead of waiting:
 * piscina queues a read for a replacement thread it never starts once replacements fail at
 * startup, so the read would wait out its whole time bound.
 */
export class ReadPoolUnavailable extends Error {
  constructor(cause: unknown) {
    super('the read workers are not running', { cause })
    this.name = 'ReadPoolUnavailable'
  }
}

/** Compiled TypeScript (dist) runs read-worker.js; from source (tsx, vitest) the .ts needs tsx. */
function workerModule(url: URL | undefined): { filename: string; execArgv: string[] } {
  const js = url ?? new URL('./read-worker.js', import.meta.url)
  const filename = fileURLToPath(js)
  if (existsSync(filename)) return { filename, execArgv: [] }
  // tsx by its resolved URL: a bare `tsx` would be looked up from the process's working
  // directory, and a server started elsewhere (the README tour's fresh folder) had workers
  // that never started.
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  return { filename: filename.replace(/\.js$/, '.ts'), execArgv: ['--import', tsx] }
}

/**
 * SQLite reads off the event loop (issue 14): a fixed pool of worker threads, each holding a
 * read-only connection to the store's file, run compiled queries (SQL text + parameters) and
 * return their rows. The main thread keeps the single writer connection.
 *
 * better-sqlite3 cannot interrupt a running statement, so a read stopped early (its time bound,
 * its client gone) ends its worker: the thread is terminated and a fresh one takes its place at
 * once. A thread inside SQLite only ends when the statement returns to JavaScript; until then it
 * is "abandoned", and `abandoned()` counts those so callers can refuse new reads while too many
 * are still burning CPU.
 *
 * A worker that fails to start (piscina's 'error': a thread lost outside any task) fails the
 * whole pool: its unfinished reads are rejected with ReadPoolUnavailable, its threads are
 * ended, and every read is refused at once for `retryMs`; the next read after that starts a
 * fresh pool (the cause may have passed: a file briefly unreadable, no memory for a thread).
 *
 * The threads start on the first read, not with the store: each is a V8 isolate of its own
 * (~13 MB resident), and a node that is never asked a search (most reads are by id) should not
 * carry them (issue 21, idle RSS). The first search pays their start (tens of milliseconds).
 */
export class ReadPool {
  #pool: Piscina<readonly ReadQuery[], ReadOutcome> | undefined
  /** Set while the pool is failed: why, and when. */
  #failure: { error: unknown; at: number } | undefined
  /** Reject functions of the reads sent to the current pool and not yet answered. */
  readonly #unanswered = new Set<(error: Error) => void>()
  /** Every thread ever started and not yet exited. */
  readonly #live = new Set<Worker>()
  /** Closed with the store: no thread is started after that. */
  #closed = false

  constructor(readonly options: ReadPoolOptions) {}

  #start(): Piscina<readonly ReadQuery[], ReadOutcome> {
    const { filename, execArgv } = workerModule(this.options.workerUrl)
    // The key reaches the threads of this process only (worker data is copied in memory).
    const data: ReadWorkerData = {
      file: this.options.file,
      busyTimeoutMs: this.options.busyTimeoutMs,
      ...(this.options.key ? { keyHex: this.options.key.toString('hex') } : {}),
    }
    const pool = new Piscina<readonly ReadQuery[], ReadOutcome>({
      filename,
      execArgv,
      workerData: data,
      minThreads: this.options.threads,
      maxThreads: this.options.threads,
      // Threads live as long as the pool: each holds a warm connection and statement cache.
      idleTimeout: Number.POSITIVE_INFINITY,
      // Callers admit at most `threads` reads at once (search-runner.ts): none ever queue here.
      maxQueue: this.options.threads,
    })
    pool.on('workerCreate', () => this.#track(pool))
    pool.on('error', (error: unknown) => this.#fail(pool, error))
    this.#track(pool)
    return pool
  }

  #fail(pool: Piscina<readonly ReadQuery[], ReadOutcome>, error: unknown): void {
    if (pool !== this.#pool || this.#failure) return
    this.#failure = { error, at: Date.now() }
    const unavailable = new ReadPoolUnavailable(error)
    for (const reject of this.#unanswered) reject(unavailable)
    this.#unanswered.clear()
    // Its remaining threads end (a running statement's thread once it returns, as on a stop).
    pool.destroy().catch(() => undefined)
  }

  #track(pool: Piscina<readonly ReadQuery[], ReadOutcome>): void {
    for (const worker of pool.threads) {
      if (this.#live.has(worker)) continue
      this.#live.add(worker)
      worker.once('exit', () => this.#live.delete(worker))
      // A thread that threw (its connection would not open) runs no statement: it is not an
      // abandoned one, even in the moment before its 'exit' (a loaded machine saw that moment
      // count it, and a failing pool answered "busy" rather than "unavailable").
      worker.once('error', () => this.#live.delete(worker))
    }
  }

  /** Why the pool refuses reads now, if it does (health, tests). */
  failure(): unknown {
    return this.#failure?.error
  }

  /**
   * Runs the queries in one read transaction on a worker. When `signal` aborts first, the
   * promise rejects with piscina's AbortError and that worker is terminated and replaced. A
   * statement's own error rejects as an Error with its message and code; a pool without working
   * threads rejects with ReadPoolUnavailable, at once.
   */
  async run(queries: readonly ReadQuery[], signal?: AbortSignal): Promise<ReadResult> {
    if (this.#failure) {
      if (Date.now() - this.#failure.at < (this.options.retryMs ?? READ_POOL_RETRY_MS))
        throw new ReadPoolUnavailable(this.#failure.error)
      this.#failure = undefined
      this.#pool = undefined
    }
    if (this.#closed) throw new ReadPoolUnavailable(new Error('the read pool is closed'))
    this.#pool ??= this.#start()
    const pool = this.#pool
    const outcome = await new Promise<ReadOutcome>((resolve, reject) => {
      this.#unanswered.add(reject)
      pool.run(queries, signal ? { signal } : {}).then(
        (value) => {
          this.#unanswered.delete(reject)
          resolve(value)
        },
        (error: unknown) => {
          this.#unanswered.delete(reject)
          // A stop is the caller's (bounded-reads.ts); anything else thrown by piscina means
          // the thread died under this read (a statement's error comes back as a value).
          reject(signal?.aborted ? error : new ReadPoolUnavailable(error))
        },
      )
    })
    if ('rows' in outcome) return outcome.rows
    throw Object.assign(new Error(outcome.error.message), {
      ...(outcome.error.code ? { code: outcome.error.code } : {}),
    })
  }

  /** Threads terminated by a stop whose statement has not returned yet. */
  abandoned(): number {
    if (this.#pool) this.#track(this.#pool)
    return Math.max(0, this.#live.size - (this.#pool?.threads.length ?? 0))
  }

  /** Threads alive now, abandoned ones included (tests, metrics); none before the first read. */
  liveThreads(): number {
    if (this.#pool) this.#track(this.#pool)
    return this.#live.size
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#pool?.destroy()
  }
}
