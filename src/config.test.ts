import { availableParallelism } from 'node:os'
import { describe, expect, it } from 'vitest'
import { ConfigError, DEFAULT_PROVIDERS, loadConfig } from './config.js'
import { defaultHashingLimits } from './crypto/passwords.js'

const problemsOf = (env: NodeJS.ProcessEnv): string[] => {
  try {
    loadConfig(env)
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError)
    return (e as ConfigError).problems
  }
  throw new Error('expected a ConfigError')
}

describe('config: messaging providers', () => {
  it('defaults to the real APIs with a 10 s bound', () => {
    expect(loadConfig({}).providers).toEqual({
      sendgridBaseUrl: 'https://api.sendgrid.com',
      twilioBaseUrl: 'https://api.twilio.com',
      timeoutMs: 10_000,
    })
    expect(DEFAULT_PROVIDERS.timeoutMs).toBe(10_000)
  })

  it('takes other base URLs (trailing slash dropped) and timeouts', () => {
    const config = loadConfig({
      COFFER_SENDGRID_BASE_URL: 'http://127.0.0.1:4010/',
      COFFER_TWILIO_BASE_URL: 'https://proxy.example.com/twilio//',
      COFFER_PROVIDER_TIMEOUT_MS: '2500',
    })
    expect(config.providers).toEqual({
      sendgridBaseUrl: 'http://127.0.0.1:4010',
      twilioBaseUrl: 'https://proxy.example.com/twilio',
      timeoutMs: 2500,
    })
  })

  it('lists every bad provider setting', () => {
    expect(
      problemsOf({
        COFFER_SENDGRID_BASE_URL: 'api.sendgrid.com',
        COFFER_TWILIO_BASE_URL: 'https://user:pw@api.twilio.com/?x=1',
        COFFER_PROVIDER_TIMEOUT_MS: '0',
      }),
    ).toEqual([
      'COFFER_SENDGRID_BASE_URL must be an http(s) URL',
      'COFFER_TWILIO_BASE_URL must be an http(s) URL without credentials, query or fragment',
      'COFFER_PROVIDER_TIMEOUT_MS must be an integer from 1 to 120000',
    ])
    expect(problemsOf({ COFFER_SENDGRID_BASE_URL: 'ftp://example.com' })).toEqual([
      'COFFER_SENDGRID_BASE_URL must be an http(s) URL without credentials, query or fragment',
    ])
    expect(problemsOf({ COFFER_PROVIDER_TIMEOUT_MS: 'soon' })).toEqual([
      'COFFER_PROVIDER_TIMEOUT_MS must be an integer from 1 to 120000',
    ])
  })
})

describe('config: access-token life', () => {
  it('caps access tokens at 30 days unless COFFER_ACCESS_TOKEN_MAX_DAYS says otherwise', () => {
    expect(loadConfig({}).accessTokenMaxDays).toBe(30)
    expect(loadConfig({ COFFER_ACCESS_TOKEN_MAX_DAYS: '3650' }).accessTokenMaxDays).toBe(3650)
    for (const bad of ['0', '3651', '1.5', 'x'])
      expect(problemsOf({ COFFER_ACCESS_TOKEN_MAX_DAYS: bad })).toEqual([
        'COFFER_ACCESS_TOKEN_MAX_DAYS must be an integer from 1 to 3650',
      ])
  })
})

describe('config: login flood protection and proxy trust', () => {
  it('defaults: no proxy trusted, 50 failures per address per 15 min, 600 per minute in all', () => {
    const config = loadConfig({})
    expect(config.trustProxy).toBe(false)
    expect(config.login).toEqual({
      perAddressMax: 50,
      perAddressWindowSeconds: 900,
      globalMax: 600,
      globalWindowSeconds: 60,
      refusalDelayMs: 1000,
      inFlightWaitMs: 5000,
    })
    expect(config.argon2).toEqual({
      maxConcurrent: Math.max(1, Math.min(2, Math.floor(availableParallelism() / 2))),
      maxQueued: 32,
    })
    expect(config.startupNotes).toEqual([])
  })

  it('reads true as one hop, with a note to log at start', () => {
    const config = loadConfig({ COFFER_TRUST_PROXY: 'true' })
    expect(config.trustProxy).toBe(1)
    expect(config.startupNotes.join()).toMatch(/COFFER_TRUST_PROXY=true now means 1 hop/)
    expect(loadConfig({ COFFER_TRUST_PROXY: 'false' }).trustProxy).toBe(false)
    expect(loadConfig({ COFFER_TRUST_PROXY: '0' }).trustProxy).toBe(false)
  })

  it('takes a hop count up to 16 or a list of proxy addresses and CIDRs', () => {
    expect(loadConfig({ COFFER_TRUST_PROXY: '2' }).trustProxy).toBe(2)
    expect(loadConfig({ COFFER_TRUST_PROXY: '16' }).trustProxy).toBe(16)
    expect(problemsOf({ COFFER_TRUST_PROXY: '17' })).toEqual([
      'COFFER_TRUST_PROXY hops must be at most 16',
    ])
    expect(
      loadConfig({ COFFER_TRUST_PROXY: '10.0.0.0/8, 192.0.2.1,2001:db8::/32,loopback' }).trustProxy,
    ).toEqual(['10.0.0.0/8', '192.0.2.1', '2001:db8::/32', 'loopback'])
    for (const bad of ['proxy.example.com', '10.0.0.0/33', '10.0.0.1/8/1', '2001:db8::/129', ','])
      expect(problemsOf({ COFFER_TRUST_PROXY: bad })[0]).toMatch(/^COFFER_TRUST_PROXY must be/)
  })

  it('bounds the login limits, naming the setting', () => {
    const config = loadConfig({
      COFFER_LOGIN_ADDRESS_MAX_FAILURES: '1',
      COFFER_LOGIN_ADDRESS_WINDOW_SECONDS: '86400',
      COFFER_LOGIN_GLOBAL_MAX_FAILURES: '1000000',
      COFFER_LOGIN_GLOBAL_WINDOW_SECONDS: '1',
      COFFER_LOGIN_REFUSAL_DELAY_MS: '0',
      COFFER_LOGIN_IN_FLIGHT_WAIT_MS: '0',
    })
    expect(config.login).toEqual({
      perAddressMax: 1,
      perAddressWindowSeconds: 86_400,
      globalMax: 1_000_000,
      globalWindowSeconds: 1,
      refusalDelayMs: 0,
      inFlightWaitMs: 0,
    })
    expect(loadConfig({ COFFER_LOGIN_IN_FLIGHT_WAIT_MS: '60000' }).login.inFlightWaitMs).toBe(
      60_000,
    )
    expect(loadConfig({ COFFER_LOGIN_REFUSAL_DELAY_MS: '10000' }).login.refusalDelayMs).toBe(10_000)
    expect(
      problemsOf({
        COFFER_LOGIN_ADDRESS_MAX_FAILURES: '0',
        COFFER_LOGIN_ADDRESS_WINDOW_SECONDS: '86401',
        COFFER_LOGIN_GLOBAL_MAX_FAILURES: '1000001',
        COFFER_LOGIN_GLOBAL_WINDOW_SECONDS: '1.5',
        COFFER_LOGIN_REFUSAL_DELAY_MS: '10001',
        COFFER_LOGIN_IN_FLIGHT_WAIT_MS: '60001',
      }),
    ).toEqual([
      'COFFER_LOGIN_ADDRESS_MAX_FAILURES must be an integer from 1 to 1000000',
      'COFFER_LOGIN_ADDRESS_WINDOW_SECONDS must be an integer from 1 to 86400',
      'COFFER_LOGIN_GLOBAL_MAX_FAILURES must be an integer from 1 to 1000000',
      'COFFER_LOGIN_GLOBAL_WINDOW_SECONDS must be an integer from 1 to 86400',
      'COFFER_LOGIN_REFUSAL_DELAY_MS must be an integer from 0 to 10000',
      'COFFER_LOGIN_IN_FLIGHT_WAIT_MS must be an integer from 0 to 60000',
    ])
  })

  it('keeps argon2 below the libuv pool size so file I/O always has a thread', () => {
    // Half the pool and half the CPUs: one hash on two cores, never all of a pool.
    expect(defaultHashingLimits(4, 2)).toEqual({ maxConcurrent: 1, maxQueued: 32 })
    expect(defaultHashingLimits(4, 16)).toEqual({ maxConcurrent: 2, maxQueued: 32 })
    expect(defaultHashingLimits(8, 16)).toEqual({ maxConcurrent: 4, maxQueued: 32 })
    expect(defaultHashingLimits(2, 1)).toEqual({ maxConcurrent: 1, maxQueued: 32 })
    expect(loadConfig({ UV_THREADPOOL_SIZE: '8' }).argon2.maxConcurrent).toBe(
      Math.max(1, Math.min(4, Math.floor(availableParallelism() / 2))),
    )
    expect(loadConfig({ COFFER_ARGON2_MAX_CONCURRENT: '3' }).argon2.maxConcurrent).toBe(3)
    expect(problemsOf({ COFFER_ARGON2_MAX_CONCURRENT: '4' })).toEqual([
      'COFFER_ARGON2_MAX_CONCURRENT must be an integer from 1 to 3',
    ])
    expect(loadConfig({ COFFER_ARGON2_MAX_QUEUED: '0' }).argon2.maxQueued).toBe(0)
    expect(loadConfig({ COFFER_ARGON2_MAX_QUEUED: '10000' }).argon2.maxQueued).toBe(10_000)
    expect(problemsOf({ COFFER_ARGON2_MAX_QUEUED: '10001' })).toEqual([
      'COFFER_ARGON2_MAX_QUEUED must be an integer from 0 to 10000',
    ])
    expect(problemsOf({ UV_THREADPOOL_SIZE: '1' })[0]).toBe(
      'UV_THREADPOOL_SIZE must be an integer from 2 to 1024',
    )
  })
})

describe('COFFER_AUDIT (issue 13): off for benchmarks only', () => {
  it('is on by default, may be turned off outside production, never in it', () => {
    expect(loadConfig({}).audit).toBe(true)
    expect(loadConfig({ COFFER_AUDIT: 'off' }).audit).toBe(false)
    expect(problemsOf({ COFFER_AUDIT: 'no' })).toEqual(['COFFER_AUDIT must be on or off'])
    expect(problemsOf({ COFFER_AUDIT: 'off', COFFER_ENV: 'production' })).toContain(
      'COFFER_AUDIT=off is for benchmarks only and is refused when COFFER_ENV=production',
    )
  })
})

describe('COFFER_AUDIT_RETENTION_DAYS and COFFER_AUDIT_SINK (issue 13)', () => {
  it('keeps forever by default; takes 1 to 36500 days', () => {
    expect(loadConfig({}).auditRetentionDays).toBeUndefined()
    expect(loadConfig({ COFFER_AUDIT_RETENTION_DAYS: '1' }).auditRetentionDays).toBe(1)
    expect(loadConfig({ COFFER_AUDIT_RETENTION_DAYS: '36500' }).auditRetentionDays).toBe(36500)
    for (const bad of ['0', '36501', '1.5', 'x'])
      expect(problemsOf({ COFFER_AUDIT_RETENTION_DAYS: bad })).toEqual([
        'COFFER_AUDIT_RETENTION_DAYS must be an integer from 1 to 36500 (unset: keep forever)',
      ])
    expect(problemsOf({ COFFER_AUDIT_SINK: 'db,syslog' })[0]).toMatch(/COFFER_AUDIT_SINK takes/)
  })
})
