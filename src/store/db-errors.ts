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
