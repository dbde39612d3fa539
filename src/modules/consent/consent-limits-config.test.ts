import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../config.js'
import { DEFAULT_UNCHOSEN_TTL_DAYS } from './consent.service.js'
import { DEFAULT_PRUNE_INTERVAL_MS } from './consent-pruning.js'
import { DEFAULT_CONSENT_RATE_LIMITS } from './consent-rate-limit.js'

describe('config: consent flood limits and expiry', () => {
  it('defaults: 120 per address and 6000 per shop a minute, 30 days, hourly', () => {
    const config = loadConfig({})
    expect(config.consentRateLimit).toEqual({ perAddress: 120, perShop: 6000, windowSeconds: 60 })
    expect(config.consentRateLimit).toEqual(DEFAULT_CONSENT_RATE_LIMITS)
    expect(config.consentUnchosenTtlDays).toBe(30)
    expect(DEFAULT_UNCHOSEN_TTL_DAYS).toBe(30)
    expect(config.consentPruneIntervalSeconds * 1000).toBe(DEFAULT_PRUNE_INTERVAL_MS)
  })

  it('takes other values and refuses what is not a positive integer in range', () => {
    const config = loadConfig({
      COFFER_CONSENT_RATE_LIMIT_PER_ADDRESS: '10',
      COFFER_CONSENT_RATE_LIMIT_PER_SHOP: '1000000',
      COFFER_CONSENT_RATE_LIMIT_WINDOW_SECONDS: '86400',
      COFFER_CONSENT_UNCHOSEN_TTL_DAYS: '1',
      COFFER_CONSENT_PRUNE_INTERVAL_SECONDS: '60',
    })
    expect(config.consentRateLimit).toEqual({
      perAddress: 10,
      perShop: 1_000_000,
      windowSeconds: 86_400,
    })
    expect(config.consentUnchosenTtlDays).toBe(1)
    expect(config.consentPruneIntervalSeconds).toBe(60)
    let problems: string[] = []
    try {
      loadConfig({
        COFFER_CONSENT_RATE_LIMIT_PER_ADDRESS: '0',
        COFFER_CONSENT_RATE_LIMIT_PER_SHOP: '1000001',
        COFFER_CONSENT_RATE_LIMIT_WINDOW_SECONDS: '1.5',
        COFFER_CONSENT_UNCHOSEN_TTL_DAYS: 'Infinity',
        COFFER_CONSENT_PRUNE_INTERVAL_SECONDS: '-1',
      })
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError)
      problems = (e as ConfigError).problems
    }
    expect(problems).toEqual([
      'COFFER_CONSENT_RATE_LIMIT_PER_ADDRESS must be an integer from 1 to 1000000',
      'COFFER_CONSENT_RATE_LIMIT_PER_SHOP must be an integer from 1 to 1000000',
      'COFFER_CONSENT_RATE_LIMIT_WINDOW_SECONDS must be an integer from 1 to 86400',
      'COFFER_CONSENT_UNCHOSEN_TTL_DAYS must be an integer from 1 to 3650',
      'COFFER_CONSENT_PRUNE_INTERVAL_SECONDS must be an integer from 1 to 86400',
    ])
  })
})
