import { createRequire } from 'node:module'
import type PgModule from 'pg'

let loaded: typeof PgModule | undefined

/**
 * node-postgres, loaded on first use (synchronously: it is CommonJS): a node on SQLite never
 * carries it in memory.
 */
export function pgModule(): typeof PgModule {
  loaded ??= createRequire(import.meta.url)('pg') as typeof PgModule
  return loaded
}
