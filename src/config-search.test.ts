import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'

/** Issue 14: where searches run and how many at once. */
const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return e.problems
    throw e
  }
  return []
}

const SETTINGS: [name: string, min: number, max: number][] = [
  ['COFFER_SEARCH_WORKERS', 0, 64],
  ['COFFER_SEARCH_QUEUE', 0, 10_000],
]

describe('config: search workers, concurrency and queue', () => {
  it('defaults: 2 SQLite workers, half the PostgreSQL pool at once, 32 waiting', () => {
    expect(loadConfig({}).search).toEqual({ workers: 2, pgConcurrency: 5, queue: 32 })
    expect(loadConfig({ COFFER_PG_POOL_SIZE: '3' }).search.pgConcurrency).toBe(1)
    expect(loadConfig({ COFFER_PG_POOL_SIZE: '1' }).search.pgConcurrency).toBe(1)
  })

  for (const [name, min, max] of SETTINGS) {
    it(`${name} takes ${min} to ${max} and refuses one beyond either end, naming itself`, () => {
      for (const ok of [min, max]) expect(problemsOf({ [name]: String(ok) })).toEqual([])
      for (const bad of [String(min - 1), String(max + 1), '1.5', 'ten']) {
        expect(problemsOf({ [name]: bad })).toContain(
          `${name} must be an integer from ${min} to ${max}`,
        )
      }
    })
  }

  it('COFFER_SEARCH_CONCURRENCY takes 1 up to one below COFFER_PG_POOL_SIZE', () => {
    const pool = { COFFER_PG_POOL_SIZE: '10' }
    expect(problemsOf({ ...pool, COFFER_SEARCH_CONCURRENCY: '1' })).toEqual([])
    expect(problemsOf({ ...pool, COFFER_SEARCH_CONCURRENCY: '9' })).toEqual([])
    expect(problemsOf({ ...pool, COFFER_SEARCH_CONCURRENCY: '10' })).toEqual([
      'COFFER_SEARCH_CONCURRENCY must be below COFFER_PG_POOL_SIZE',
    ])
    expect(problemsOf({ ...pool, COFFER_SEARCH_CONCURRENCY: '0' })).toContain(
      'COFFER_SEARCH_CONCURRENCY must be an integer from 1 to 1000',
    )
    expect(loadConfig({ ...pool, COFFER_SEARCH_CONCURRENCY: '9' }).search.pgConcurrency).toBe(9)
  })
})
