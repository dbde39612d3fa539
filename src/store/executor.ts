import type { Kysely } from 'kysely'
import type { Database } from './schema.js'

/**
 * What repositories run on: the database or a transaction (a Kysely `Transaction` is a `Kysely`).
 * Services pass the transaction down so several repos commit together. On SQLite the one
 * connection is held for the whole transaction, so never await network I/O inside one.
 */
export type Executor = Kysely<Database>
