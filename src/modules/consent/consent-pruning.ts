import type { ConsentService } from './consent.service.js'

export const DEFAULT_PRUNE_INTERVAL_MS = 3_600_000
/** The first pass after start: soon, but not in the middle of starting up. */
const FIRST_PASS_MAX_MS = 60_000

export interface PruningJob {
  /** Stops the timer and waits for a pass in progress (the store may close next). */
  stop(): Promise<void>
}

/**
 * Runs `consent.pruneUnchosen()` every `everyMs` in the serving process, one pass at a time.
 * The timers are unref'd: they never keep a process alive. A failed pass is reported and the
 * next one tries again.
 */
export function schedulePruning(
  consent: ConsentService,
  everyMs: number,
  report: { pruned(count: number): void; failed(error: unknown): void },
): PruningJob {
  let running: Promise<void> | undefined
  const pass = () => {
    if (running !== undefined) return
    running = consent
      .pruneUnchosen()
      .then((count) => {
        if (count > 0) report.pruned(count)
      }, report.failed)
      .finally(() => {
        running = undefined
      })
  }
  const first = setTimeout(pass, Math.min(everyMs, FIRST_PASS_MAX_MS))
  const every = setInterval(pass, everyMs)
  first.unref()
  every.unref()
  return {
    stop: async () => {
      clearTimeout(first)
      clearInterval(every)
      await running
    },
  }
}
