/** Thrown by BoundedGate.run when every slot is taken and the queue is full. */
export class GateFullError extends Error {
  constructor() {
    super('every slot and queue place is taken')
    this.name = 'GateFullError'
  }
}

/**
 * A counting semaphore with a bounded FIFO queue: at most `maxRunning` tasks run at once, at most
 * `maxQueued` wait, and any task beyond that is refused at once (GateFullError) instead of
 * waiting without bound. Refusing early keeps a flood from turning into unbounded memory and
 * latency: the caller answers "busy, retry later" while the queue still drains.
 */
export class BoundedGate {
  #running = 0
  readonly #waiting: (() => void)[] = []

  constructor(
    readonly maxRunning: number,
    readonly maxQueued: number,
  ) {
    if (!Number.isInteger(maxRunning) || maxRunning < 1) throw new RangeError('maxRunning >= 1')
    if (!Number.isInteger(maxQueued) || maxQueued < 0) throw new RangeError('maxQueued >= 0')
  }

  /** Tasks running and waiting now (for tests and diagnostics). */
  load(): { running: number; queued: number } {
    return { running: this.#running, queued: this.#waiting.length }
  }

  /**
   * `signal`: a task still waiting when it aborts leaves the queue and rejects with the
   * signal's reason (a search whose time bound ran out while queued); once running it is the
   * task's own business.
   */
  async run<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) throw signal.reason
    if (this.#running >= this.maxRunning) {
      if (this.#waiting.length >= this.maxQueued) throw new GateFullError()
      // The slot is handed over by the finishing task (see #release), never raced for.
      await new Promise<void>((resolve, reject) => {
        const handOver = () => {
          signal?.removeEventListener('abort', leave)
          resolve()
        }
        const leave = () => {
          const at = this.#waiting.indexOf(handOver)
          if (at >= 0) this.#waiting.splice(at, 1)
          reject(signal?.reason)
        }
        signal?.addEventListener('abort', leave, { once: true })
        this.#waiting.push(handOver)
      })
    } else {
      this.#running++
    }
    try {
      return await task()
    } finally {
      this.#release()
    }
  }

  #release(): void {
    const next = this.#waiting.shift()
    if (next) next()
    else this.#running--
  }
}
