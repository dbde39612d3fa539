import type { Compilable, CompiledQuery, DialectAdapter } from 'kysely'
import type { Executor } from './executor.js'

interface Compiled<R> {
  query: CompiledQuery<R>
  /** For each compiled parameter: the index of the argument it takes, or -1 for a constant. */
  slots: number[]
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
  return { query, slots: query.parameters.map((p) => sentinels.indexOf(p as string)) }
}
