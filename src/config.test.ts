import { describe, expect, it } from 'vitest'
import { ConfigError, DEFAULT_PROVIDERS, loadConfig } from './config.js'

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
