import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Worker } from 'node:worker_threads'
import { Piscina } from 'piscina'
import type { ReadQuery, ReadWorkerData } from './read-worker.js'

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
  /** The file key of an encrypted file (sqlite-cipher.ts): each worker's connection uses it. */
  key?: Buffer
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
 */
export class ReadPool {
  readonly #pool: Piscina<readonly ReadQuery[], ReadResult>
  /** Every thread ever started and not yet exited. */
  readonly #live = new Set<Worker>()

  constructor(readonly options: ReadPoolOptions) {
    const { filename, execArgv } = workerModule(options.workerUrl)
    // The key reaches the threads of this process only (worker data is copied in memory).
    const data: ReadWorkerData = {
      file: options.file,
      busyTimeoutMs: options.busyTimeoutMs,
      ...(options.key ? { keyHex: options.key.toString('hex') } : {}),
    }
    this.#pool = new Piscina({
      filename,
      execArgv,
      workerData: data,
      minThreads: options.threads,
      maxThreads: options.threads,
      // Threads live as long as the pool: each holds a warm connection and statement cache.
      idleTimeout: Number.POSITIVE_INFINITY,
      // Callers admit at most `threads` reads at once (search-runner.ts): none ever queue here.
      maxQueue: options.threads,
    })
    this.#pool.on('workerCreate', () => this.#track())
    // A worker that cannot start (a broken file) fails its task; piscina also emits it here.
    this.#pool.on('error', () => {})
    this.#track()
  }

  #track(): void {
    for (const worker of this.#pool.threads) {
      if (this.#live.has(worker)) continue
      this.#live.add(worker)
      worker.once('exit', () => this.#live.delete(worker))
    }
  }

  /**
   * Runs the queries in one read transaction on a worker. When `signal` aborts first, the
   * promise rejects with piscina's AbortError and that worker is terminated and replaced.
   */
  run(queries: readonly ReadQuery[], signal?: AbortSignal): Promise<ReadResult> {
    return this.#pool.run(queries, signal ? { signal } : {})
  }

  /** Threads terminated by a stop whose statement has not returned yet. */
  abandoned(): number {
    this.#track()
    return Math.max(0, this.#live.size - this.#pool.threads.length)
  }

  /** Threads alive now, abandoned ones included (tests, metrics). */
  liveThreads(): number {
    this.#track()
    return this.#live.size
  }

  async close(): Promise<void> {
    await this.#pool.destroy()
  }
}
