import { type Compilable, type CompiledQuery, type DialectAdapter, SelectQueryNode } from 'kysely'
import type { Executor } from './executor.js'

interface Compiled<R> {
  query: CompiledQuery<R>
  /** For each compiled parameter: the index of the argument it takes, or -1 for a constant. */
  slots: number[]
  /** A SELECT: it may run on a database's direct reader (below); writes never do. */
  select: boolean
}

/**
 * Runs a compiled read straight on the database, synchronously, or answers undefined when it
 * cannot now (SQLite: a transaction holds the connection), and the query then goes through
 * Kysely as usual.
 */
export type DirectRead = (sql: string, parameters: readonly unknown[]) => unknown[] | undefined

/** Each database's direct reader (SQLite: store/db.ts), keyed by its Kysely instance. */
const directReads = new WeakMap<Executor, DirectRead>()

/**
 * Lets precompiled SELECTs on `db` (not on its transactions: they are other instances) skip
 * Kysely's connection queue, its driver wrappers and their promises: on SQLite these cost more
 * than the primary-key lookup itself. The wrappers watch writes only (the audit trail's event,
 * the rights feed), so a read loses nothing by passing them.
 */
export function enableDirectReads(db: Executor, read: DirectRead): void {
  directReads.set(db, read)
}

/**
 * A query built and compiled once, then executed with new parameter values: building and
 * compiling with Kysely costs more than running a primary-key lookup on SQLite, so the hottest
 * lookups (credential, user, group policies) skip it. The query is built with sentinel string
 * arguments; each compiled parameter equal to a sentinel is replaced by the matching argument
 * on every call, and any other parameter (a constant inside the query) is kept.
 *
 * Compiled once per database: the SQL differs by engine (`?` on SQLite, `$1` on PostgreSQL) and
 * a process may open both (tests do). A database's transactions share its dialect adapter, so
 * the adapter is the key.
 */
export function precompiled<A extends string[], R>(
  build: (db: Executor, ...args: A) => Compilable<R>,
): (db: Executor, ...args: A) => Promise<R[]> {
  const cache = new WeakMap<DialectAdapter, Compiled<R>>()
  return async (db, ...args) => {
    const adapter = db.getExecutor().adapter
    let compiled = cache.get(adapter)
    if (!compiled) {
      compiled = compile(build, db, args)
      cache.set(adapter, compiled)
    }
    const { query, slots } = compiled
    const parameters = query.parameters.map((p, i) => {
      const slot = slots[i] as number
      return slot >= 0 ? args[slot] : p
    })
    if (compiled.select) {
      const rows = directReads.get(db)?.(query.sql, parameters)
      if (rows) return rows as R[]
    }
    const result = await db.executeQuery<R>({ ...query, parameters })
    return result.rows
  }
}

function compile<A extends string[], R>(
  build: (db: Executor, ...args: A) => Compilable<R>,
  db: Executor,
  args: A,
): Compiled<R> {
  const sentinels = args.map((_, i) => `\u0000coffer-param-${i}\u0000`) as A
  const query = build(db, ...sentinels).compile()
  if (sentinels.some((s) => !query.parameters.includes(s))) {
    throw new Error('precompiled query does not use every argument as a parameter')
  }
  return {
    query,
    slots: query.parameters.map((p) => sentinels.indexOf(p as string)),
    select: SelectQueryNode.is(query.query),
  }
}

/**
 * `precompiled` for a query that ends in an `in` list of `list.length` values: one precompiled
 * query per length up to `maxLength` (made on first use, so at most that many), a query built as
 * usual for a longer list.
 */
export function precompiledList<F extends string[], R>(
  maxLength: number,
  build: (db: Executor, fixed: F, list: string[]) => Compilable<R>,
): (db: Executor, fixed: F, list: readonly string[]) => Promise<R[]> {
  const byLength = new Map<number, (db: Executor, ...args: string[]) => Promise<R[]>>()
  return async (db, fixed, list) => {
    if (list.length > maxLength) {
      return (await db.executeQuery<R>(build(db, fixed, [...list]).compile())).rows
    }
    let query = byLength.get(list.length)
    if (!query) {
      const n = fixed.length
      query = precompiled((db: Executor, ...args: string[]) =>
        build(db, args.slice(0, n) as F, args.slice(n)),
      )
      byLength.set(list.length, query)
    }
    return query(db, ...fixed, ...list)
  }
}
