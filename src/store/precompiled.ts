import type { Compilable, CompiledQuery } from 'kysely'
import type { Executor } from './executor.js'

/**
 * A query built and compiled once, then executed with new parameter values: building and
 * compiling with Kysely costs more than running a primary-key lookup on SQLite, so the hottest
 * lookups (credential, user, group policies) skip it. The query is built with sentinel string
 * arguments; each compiled parameter equal to a sentinel is replaced by the matching argument
 * on every call, and any other parameter (a constant inside the query) is kept.
 */
export function precompiled<A extends string[], R>(
  build: (db: Executor, ...args: A) => Compilable<R>,
): (db: Executor, ...args: A) => Promise<R[]> {
  let compiled: CompiledQuery<R> | undefined
  let slots: number[] = []
  return async (db, ...args) => {
    if (!compiled) {
      const sentinels = args.map((_, i) => `\u0000coffer-param-${i}\u0000`) as A
      const query = build(db, ...sentinels).compile()
      slots = query.parameters.map((p) => sentinels.indexOf(p as string))
      if (sentinels.some((s) => !query.parameters.includes(s))) {
        throw new Error('precompiled query does not use every argument as a parameter')
      }
      compiled = query
    }
    const base = compiled
    const parameters = base.parameters.map((p, i) => {
      const slot = slots[i] as number
      return slot >= 0 ? args[slot] : p
    })
    const result = await db.executeQuery<R>({ ...base, parameters })
    return result.rows
  }
}
