import { AsyncLocalStorage } from 'node:async_hooks'
import { errors } from '../lib/errors.js'

/**
 * The time by which a request's database work must be done. The HTTP layer runs each request
 * inside one (http/request-deadline.ts); the store reads it at every statement, so neither
 * services nor repos pass it along. Work outside a request (start-up, CLI) has none.
 */
export class Deadline {
  readonly #controller = new AbortController()
  readonly #timer: NodeJS.Timeout
  readonly at: number

  constructor(readonly timeoutMs: number) {
    this.at = Date.now() + timeoutMs
    // Aborting cancels statements still running then; statements after it are refused anyway.
    this.#timer = setTimeout(() => this.#controller.abort(), timeoutMs)
    this.#timer.unref()
  }

  /** Aborts when the deadline passes (while a statement may be running on the server). */
  get signal(): AbortSignal {
    return this.#controller.signal
  }

  get expired(): boolean {
    return this.#controller.signal.aborted || Date.now() >= this.at
  }

  /** The request is over: nothing more to cancel. */
  clear(): void {
    clearTimeout(this.#timer)
  }

  /** 503 REQUEST_TIMEOUT once the deadline has passed. */
  check(): void {
    if (this.expired) throw errors.requestTimeout(this.timeoutMs)
  }
}

const storage = new AsyncLocalStorage<Deadline>()

/** Runs `fn` (and everything it starts) under `deadline`. */
export function runWithDeadline<T>(deadline: Deadline, fn: () => T): T {
  return storage.run(deadline, fn)
}

export function currentDeadline(): Deadline | undefined {
  return storage.getStore()
}

/**
 * A rollback must always run: it is how a transaction past its deadline undoes its writes.
 * Every other statement (commit included) is refused once the deadline has passed.
 */
export function isRollback(sqlText: string): boolean {
  return /^\s*rollback\b/i.test(sqlText)
}

/** Runs `fn` outside any request's deadline (work shared by several requests). */
export function outsideDeadline<T>(fn: () => T): T {
  return storage.exit(fn)
}
