/**
 * Recognises a unique-constraint violation from either driver: better-sqlite3 raises
 * `SQLITE_CONSTRAINT_UNIQUE` / `SQLITE_CONSTRAINT_PRIMARYKEY`, pg raises SQLSTATE 23505.
 */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const code = (error as { code?: unknown }).code
  return (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
  )
}

/** A foreign-key violation: SQLITE_CONSTRAINT_FOREIGNKEY or SQLSTATE 23503. */
export function isForeignKeyViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const code = (error as { code?: unknown }).code
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY'
}

/**
 * SQLSTATEs of a lost or refused server connection (admin/crash shutdown, cannot connect now),
 * and 57014, a statement cancelled by the server: stopped by COFFER_PG_STATEMENT_TIMEOUT_MS (or
 * by a cancel). The request was valid; it could succeed when retried on a less busy server.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '57014'])
/** Socket-level failures of the driver's connection to the server. */
const UNAVAILABLE_SOCKET_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
])
/** pg and pg-pool raise these as plain Errors without a code. */
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
]

/**
 * The database cannot be reached or dropped the connection (pg_terminate_backend, failover,
 * idle_session_timeout, a firewall, the pool's connect timeout), or SQLite's file stayed locked
 * by another process: the request could succeed when
 * retried, so it is answered 503, never 500. The one place these driver errors are recognised.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const { code, message } = error as { code?: unknown; message?: unknown }
  if (typeof code === 'string') {
    // Class 08: connection exception (08000, 08003, 08006, 08001, 08004, …).
    if (UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return true
    if (UNAVAILABLE_SOCKET_CODES.has(code)) return true
    // SQLite: another process held the write lock past busy_timeout (COFFER_SQLITE_BUSY_TIMEOUT_MS).
    if (code.startsWith('SQLITE_BUSY')) return true
  }
  return typeof message === 'string' && UNAVAILABLE_MESSAGES.some((m) => message.startsWith(m))
}

/**
 * Codes of a write the file system had no room for: ENOSPC (and EDQUOT, a quota) from the BLOB
 * folder, SQLITE_FULL from SQLite, SQLSTATE 53100 (disk_full) from PostgreSQL. The request was
 * valid and nothing of it was kept; it can succeed once space returns. Answered 507.
 */
const STORAGE_FULL_CODES = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL', '53100'])

export function isStorageFull(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && STORAGE_FULL_CODES.has(code)
}
