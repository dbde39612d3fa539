import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'

const problemsOf = (env: NodeJS.ProcessEnv): string[] => {
  try {
    loadConfig(env)
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError)
    return (e as ConfigError).problems
  }
  throw new Error('expected a ConfigError')
}

describe('config: CORS origins (issue 11)', () => {
  it('defaults to no origin on either listener and a 2 h preflight cache', () => {
    expect(loadConfig({}).cors).toEqual({ origins: [], consentOrigins: [], maxAgeSeconds: 7200 })
    expect(loadConfig({ COFFER_CORS_ORIGINS: ' , ' }).cors.origins).toEqual([])
  })

  it('takes exact origins, trimmed and de-duplicated', () => {
    const { cors } = loadConfig({
      COFFER_CORS_ORIGINS: 'https://app.example.com, http://localhost:3000,https://app.example.com',
      COFFER_CONSENT_CORS_ORIGINS: 'https://*.myshopify.com, https://shop.example.com:8443',
    })
    expect(cors.origins).toEqual(['https://app.example.com', 'http://localhost:3000'])
    expect(cors.consentOrigins).toEqual([
      'https://*.myshopify.com',
      'https://shop.example.com:8443',
    ])
  })

  it('refuses anything a browser would never send as an Origin, and `*`', () => {
    const bad = [
      '*',
      'null',
      'app.example.com',
      'https://app.example.com/',
      'https://app.example.com/path',
      'https://App.example.com',
      'https://app.example.com:443',
      'https://user@app.example.com',
      'ftp://app.example.com',
    ]
    for (const entry of bad) {
      const problems = problemsOf({ COFFER_CORS_ORIGINS: entry })
      expect(problems, entry).toHaveLength(1)
      expect(problems[0], entry).toMatch(/^COFFER_CORS_ORIGINS /)
      expect(problems[0], entry).toContain(`"${entry}"`)
    }
    expect(problemsOf({ COFFER_CORS_ORIGINS: '*' })).toEqual([
      'COFFER_CORS_ORIGINS must list origins one by one: "*" would let any web page read the answers',
    ])
  })

  it('takes subdomain patterns on the consent API only, under a domain', () => {
    expect(problemsOf({ COFFER_CORS_ORIGINS: 'https://*.example.com' })).toEqual([
      'COFFER_CORS_ORIGINS does not accept patterns ("https://*.example.com")',
    ])
    expect(problemsOf({ COFFER_CONSENT_CORS_ORIGINS: 'https://*.com' })).toEqual([
      'COFFER_CONSENT_CORS_ORIGINS pattern "https://*.com" must name a domain under the *',
    ])
    for (const entry of [
      'https://*.Example.com',
      'https://*.example.com/',
      'https://*.*.example.com',
    ]) {
      expect(problemsOf({ COFFER_CONSENT_CORS_ORIGINS: entry })[0], entry).toMatch(
        /^COFFER_CONSENT_CORS_ORIGINS pattern .* must be scheme:\/\/\*\.domain/,
      )
    }
    expect(problemsOf({ COFFER_CONSENT_CORS_ORIGINS: '*' })[0]).toMatch(/one by one/)
  })

  it('bounds COFFER_CORS_MAX_AGE_SECONDS from 0 to 86400', () => {
    expect(loadConfig({ COFFER_CORS_MAX_AGE_SECONDS: '0' }).cors.maxAgeSeconds).toBe(0)
    expect(loadConfig({ COFFER_CORS_MAX_AGE_SECONDS: '86400' }).cors.maxAgeSeconds).toBe(86_400)
    for (const value of ['-1', '86401', '1.5', 'soon'])
      expect(problemsOf({ COFFER_CORS_MAX_AGE_SECONDS: value })).toEqual([
        'COFFER_CORS_MAX_AGE_SECONDS must be an integer from 0 to 86400',
      ])
  })
})
