import { workerData } from 'node:worker_threads'
import SQLite from 'better-sqlite3-multiple-ciphers'
import { applySqliteKey } from './sqlite-cipher.js'
import { cachingDatabase } from './statement-cache.js'

/**
 * A worker thread of the SQLite read pool (read-pool.ts): its own read-only connection to the
 * store's file, so a long search runs here while the main thread (and its one writer
 * connection) goes on serving. WAL lets this connection read beside the writer.
 */
export interface ReadWorkerData {
  file: string
  busyTimeoutMs: number
  /** The file key (hex) of an encrypted file; absent: a plaintext file. */
  keyHex?: string
}

/** One compiled statement: SQL text and its parameters, as Kysely compiles them. */
export interface ReadQuery {
  sql: string
  parameters: readonly unknown[]
}

const { file, busyTimeoutMs, keyHex } = workerData as ReadWorkerData
// readonly + query_only: this connection can never write, whatever SQL it is handed.
const database = new SQLite(file, { readonly: true, fileMustExist: true })
// The busy timeout first: the key check reads the schema, which may wait on the writer.
database.pragma(`busy_timeout = ${busyTimeoutMs}`)
applySqliteKey(database, keyHex === undefined ? undefined : Buffer.from(keyHex, 'hex'), file)
// As on the main connection: no sort or temporary table spills to an unencrypted temp file.
if (keyHex !== undefined) database.pragma('temp_store = MEMORY')
database.pragma('query_only = ON')
const statements = cachingDatabase(database)

/**
 * Runs the queries in one read transaction: they all see the same committed state (a count and
 * the page it goes with agree), and that state includes every write acknowledged before.
 */
const readAll = database.transaction((queries: readonly ReadQuery[]) =>
  queries.map(
    (q) => statements.prepare(q.sql).all(q.parameters as unknown[]) as Record<string, unknown>[],
  ),
)

/**
 * What a task hands back. A statement's error is returned as a value, not thrown: an Error
 * crossing to the main thread keeps only its message (structured clone drops `code`, which
 * db-errors.ts reads), and piscina rejects a task the same way when its thread died, so a thrown
 * error could not tell "this SQL failed" from "this worker is gone" (read-pool.ts).
 */
export type ReadOutcome =
  | { rows: Record<string, unknown>[][] }
  | { error: { message: string; code?: string } }

export default function run(queries: readonly ReadQuery[]): ReadOutcome {
  try {
    return { rows: readAll(queries) }
  } catch (e) {
    const { message, code } = e as { message?: string; code?: unknown }
    return {
      error: { message: message ?? String(e), ...(typeof code === 'string' ? { code } : {}) },
    }
  }
}
