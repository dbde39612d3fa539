/** Attempts of one short write transaction before the command gives up. */
export const WRITE_ATTEMPTS = 50
/** Longest pause between two attempts. */
const MAX_PAUSE_MS = 1000

/**
 * Runs a short write transaction, again when another writer held the database: SQLite answers
 * SQLITE_BUSY once busy_timeout (COFFER_SQLITE_BUSY_TIMEOUT_MS) passes under a serving node's
 * writes (or at once, SQLITE_BUSY_SNAPSHOT, when a read snapshot went stale), PostgreSQL a
 * serialization failure or deadlock. A background command yields to the servers' requests rather
 * than failing: up to WRITE_ATTEMPTS tries with a growing pause (at most MAX_PAUSE_MS).
 */
export async function withWriteRetry<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn()
    } catch (error) {
      if (attempt >= WRITE_ATTEMPTS || !isLockConflict(error)) throw error
      await new Promise((resolve) => setTimeout(resolve, Math.min(MAX_PAUSE_MS, 20 * attempt)))
    }
  }
}

export function isLockConflict(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const code = (error as { code?: unknown }).code
  if (typeof code !== 'string') return false
  return code.startsWith('SQLITE_BUSY') || code === '40001' || code === '40P01'
}
