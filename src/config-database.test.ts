import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'

/** Issue 12, point 2: pool size, connect/statement/idle timeouts, lock wait, request deadlines. */
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
  ['COFFER_PG_POOL_SIZE', 1, 1000],
  ['COFFER_PG_CONNECT_TIMEOUT_MS', 100, 120_000],
  ['COFFER_PG_STATEMENT_TIMEOUT_MS', 0, 3_600_000],
  ['COFFER_PG_IDLE_TIMEOUT_MS', 0, 86_400_000],
  ['COFFER_SQLITE_BUSY_TIMEOUT_MS', 0, 60_000],
  ['COFFER_REQUEST_TIMEOUT_MS', 100, 3_600_000],
  ['COFFER_BLOB_UPLOAD_TIMEOUT_MS', 1000, 86_400_000],
]

/** Settings the value of one under test must stay consistent with. */
const roomFor = (name: string, value: number): Record<string, string> => {
  if (name === 'COFFER_PG_STATEMENT_TIMEOUT_MS' && value > 0 && value < 5000)
    return { COFFER_SEARCH_TIMEOUT_MS: String(Math.max(100, value)) }
  if (name === 'COFFER_REQUEST_TIMEOUT_MS')
    return { COFFER_BLOB_UPLOAD_TIMEOUT_MS: String(Math.max(600_000, value)) }
  if (name === 'COFFER_BLOB_UPLOAD_TIMEOUT_MS')
    return { COFFER_REQUEST_TIMEOUT_MS: String(Math.min(30_000, value)) }
  return {}
}

describe('config: database pool, timeouts and request deadlines', () => {
  it('has sane defaults', () => {
    expect(loadConfig({}).database).toEqual({
      pgPoolSize: 10,
      pgConnectTimeoutMs: 5000,
      pgStatementTimeoutMs: 30_000,
      pgIdleTimeoutMs: 30_000,
      sqliteBusyTimeoutMs: 5000,
      requestTimeoutMs: 30_000,
      blobUploadTimeoutMs: 600_000,
    })
  })

  for (const [name, min, max] of SETTINGS) {
    it(`${name} takes ${min} to ${max} and refuses one beyond either end, naming itself`, () => {
      for (const ok of [min, max]) {
        expect(problemsOf({ [name]: String(ok), ...roomFor(name, ok) })).toEqual([])
      }
      for (const bad of [String(min - 1), String(max + 1), '1.5', 'ten']) {
        const problems = problemsOf({ [name]: bad, ...roomFor(name, Number(bad) || 0) })
        expect(problems).toContain(`${name} must be an integer from ${min} to ${max}`)
      }
    })
  }

  it('keeps the search bound within the statement timeout', () => {
    const equal = { COFFER_PG_STATEMENT_TIMEOUT_MS: '5000', COFFER_SEARCH_TIMEOUT_MS: '5000' }
    expect(problemsOf(equal)).toEqual([])
    expect(problemsOf({ ...equal, COFFER_SEARCH_TIMEOUT_MS: '5001' })).toEqual([
      'COFFER_SEARCH_TIMEOUT_MS must not exceed COFFER_PG_STATEMENT_TIMEOUT_MS',
    ])
    // No statement timeout at all: the search bound is the only one.
    expect(
      problemsOf({ COFFER_PG_STATEMENT_TIMEOUT_MS: '0', COFFER_SEARCH_TIMEOUT_MS: '600000' }),
    ).toEqual([])
  })

  it('gives BLOB uploads at least the deadline of every request', () => {
    const equal = { COFFER_REQUEST_TIMEOUT_MS: '60000', COFFER_BLOB_UPLOAD_TIMEOUT_MS: '60000' }
    expect(problemsOf(equal)).toEqual([])
    expect(problemsOf({ ...equal, COFFER_BLOB_UPLOAD_TIMEOUT_MS: '59999' })).toEqual([
      'COFFER_BLOB_UPLOAD_TIMEOUT_MS must be at least COFFER_REQUEST_TIMEOUT_MS',
    ])
  })
})
