import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'

function problem(env: Record<string, string>): string {
  try {
    loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return e.message
    throw e
  }
  throw new Error('expected a ConfigError')
}

describe('config: health, metrics and shutdown (issue 12)', () => {
  it('defaults: readiness bound 2 s, grace 10 s, metrics off', () => {
    expect(loadConfig({}).operations).toEqual({
      readyTimeoutMs: 2000,
      shutdownGraceMs: 10_000,
      shutdownDelayMs: 0,
      metrics: { port: undefined, host: '127.0.0.1', token: undefined },
      minFreeBytes: undefined,
    })
  })

  it('COFFER_MIN_FREE_BYTES: unset (min of 1 GiB and 5 %), 0 (off) or whole bytes', () => {
    const min = (v: string) => loadConfig({ COFFER_MIN_FREE_BYTES: v }).operations.minFreeBytes
    expect(min('')).toBeUndefined()
    expect(min('0')).toBe(0)
    expect(min('1073741824')).toBe(1024 ** 3)
    expect(min(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER)
    for (const bad of ['-1', '1.5', '1G', '5%', String(Number.MAX_SAFE_INTEGER + 1)])
      expect(problem({ COFFER_MIN_FREE_BYTES: bad }), bad).toMatch(
        /COFFER_MIN_FREE_BYTES must be an integer from 0 to 9007199254740991/,
      )
  })

  it('COFFER_READY_TIMEOUT_MS: 100 to 60000', () => {
    expect(loadConfig({ COFFER_READY_TIMEOUT_MS: '100' }).operations.readyTimeoutMs).toBe(100)
    expect(loadConfig({ COFFER_READY_TIMEOUT_MS: '60000' }).operations.readyTimeoutMs).toBe(60_000)
    expect(problem({ COFFER_READY_TIMEOUT_MS: '99' })).toMatch(/COFFER_READY_TIMEOUT_MS/)
    expect(problem({ COFFER_READY_TIMEOUT_MS: '60001' })).toMatch(/COFFER_READY_TIMEOUT_MS/)
  })

  it('COFFER_SHUTDOWN_GRACE_MS: 0 to 600000', () => {
    expect(loadConfig({ COFFER_SHUTDOWN_GRACE_MS: '0' }).operations.shutdownGraceMs).toBe(0)
    expect(loadConfig({ COFFER_SHUTDOWN_GRACE_MS: '600000' }).operations.shutdownGraceMs).toBe(
      600_000,
    )
    expect(problem({ COFFER_SHUTDOWN_GRACE_MS: '600001' })).toMatch(/COFFER_SHUTDOWN_GRACE_MS/)
    expect(problem({ COFFER_SHUTDOWN_GRACE_MS: '-1' })).toMatch(/COFFER_SHUTDOWN_GRACE_MS/)
  })

  it('COFFER_SHUTDOWN_DELAY_MS: 0 to 60000', () => {
    expect(loadConfig({ COFFER_SHUTDOWN_DELAY_MS: '0' }).operations.shutdownDelayMs).toBe(0)
    expect(loadConfig({ COFFER_SHUTDOWN_DELAY_MS: '60000' }).operations.shutdownDelayMs).toBe(
      60_000,
    )
    expect(problem({ COFFER_SHUTDOWN_DELAY_MS: '60001' })).toMatch(
      /COFFER_SHUTDOWN_DELAY_MS must be an integer from 0 to 60000/,
    )
    expect(problem({ COFFER_SHUTDOWN_DELAY_MS: '-1' })).toMatch(/COFFER_SHUTDOWN_DELAY_MS/)
    expect(problem({ COFFER_SHUTDOWN_DELAY_MS: '1.5' })).toMatch(/COFFER_SHUTDOWN_DELAY_MS/)
    expect(problem({ COFFER_SHUTDOWN_DELAY_MS: '5s' })).toMatch(/COFFER_SHUTDOWN_DELAY_MS/)
  })

  it('COFFER_METRICS_TOKEN: 32 to 1024 printable characters', () => {
    const at = (n: number) => 'a'.repeat(n)
    expect(loadConfig({ COFFER_METRICS_TOKEN: at(32) }).operations.metrics.token).toBe(at(32))
    expect(loadConfig({ COFFER_METRICS_TOKEN: at(1024) }).operations.metrics.token).toBe(at(1024))
    expect(problem({ COFFER_METRICS_TOKEN: at(31) })).toMatch(/COFFER_METRICS_TOKEN/)
    expect(problem({ COFFER_METRICS_TOKEN: at(1025) })).toMatch(/COFFER_METRICS_TOKEN/)
    expect(problem({ COFFER_METRICS_TOKEN: `${at(32)} x` })).toMatch(/COFFER_METRICS_TOKEN/)
    // The problem never quotes the token.
    expect(problem({ COFFER_METRICS_TOKEN: 'short-secret' })).not.toMatch(/short-secret/)
  })

  it('COFFER_METRICS_PORT and COFFER_METRICS_HOST', () => {
    const m = loadConfig({ COFFER_METRICS_PORT: '9464', COFFER_METRICS_HOST: '0.0.0.0' })
    expect(m.operations.metrics).toMatchObject({ port: 9464, host: '0.0.0.0' })
    expect(problem({ COFFER_METRICS_PORT: '65536' })).toMatch(/COFFER_METRICS_PORT/)
  })
})
