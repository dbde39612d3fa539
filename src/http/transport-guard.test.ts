import { describe, expect, it } from 'vitest'
import { loadConfig } from '../config.js'
import { isLoopbackAddress, isLoopbackHost, transportProblems } from './transport-guard.js'

describe('loopback addresses', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.255.0.9', true],
    ['::1', true],
    ['0:0:0:0:0:0:0:1', true],
    ['::ffff:127.0.0.1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['10.0.0.1', false],
    ['128.0.0.1', false],
    ['::2', false],
    ['::ffff:10.0.0.1', false],
    ['localhost', false],
    ['', false],
  ])('%s → %s', (address, loopback) => {
    expect(isLoopbackAddress(address)).toBe(loopback)
  })

  it('a host name counts as what it resolves to; one that does not resolve is exposed', async () => {
    expect(await isLoopbackHost('localhost')).toBe(true)
    expect(await isLoopbackHost('127.0.0.2')).toBe(true)
    expect(await isLoopbackHost('0.0.0.0')).toBe(false)
    expect(await isLoopbackHost('no-such-host.invalid')).toBe(false)
  })

  it('a host name is loopback only when every address it resolves to is', async () => {
    // A hosts file listing `localhost` twice: Fastify binds every address of that name.
    const resolvingTo =
      (...addresses: string[]) =>
      async () =>
        addresses.map((address) => ({ address }))
    expect(await isLoopbackHost('localhost', resolvingTo('127.0.0.1', '::1'))).toBe(true)
    expect(await isLoopbackHost('localhost', resolvingTo('127.0.0.1', '10.1.2.3'))).toBe(false)
    expect(await isLoopbackHost('localhost', resolvingTo('10.1.2.3', '127.0.0.1'))).toBe(false)
    expect(await isLoopbackHost('localhost', resolvingTo())).toBe(false)
  })
})

describe('the production rule (issue 19)', () => {
  const PAIR = { COFFER_TLS_CERT_FILE: '/c.pem', COFFER_TLS_KEY_FILE: '/k.pem' }
  const problems = (env: Record<string, string>, mode: 'both' | 'api' | 'consent' = 'both') =>
    transportProblems(loadConfig(env), mode)

  it('development: never', async () => {
    expect(
      await problems({
        COFFER_HOST: '0.0.0.0',
        COFFER_METRICS_PORT: '9464',
        COFFER_METRICS_HOST: '::',
      }),
    ).toEqual([])
  })

  it('production off loopback without TLS: each listener served, named', async () => {
    const env = { COFFER_ENV: 'production', COFFER_HOST: '0.0.0.0' }
    const both = await problems(env)
    expect(both).toHaveLength(2)
    expect(both[0]).toMatch(/^COFFER_HOST is 0\.0\.0\.0, not a loopback address/)
    expect(both[1]).toMatch(/^COFFER_CONSENT_HOST \(by default COFFER_HOST\) is 0\.0\.0\.0/)
    expect(await problems(env, 'api')).toHaveLength(1)
    expect((await problems(env, 'consent'))[0]).toMatch(/^COFFER_CONSENT_HOST/)
    // The consent listener on loopback, the main API off it.
    expect(await problems({ ...env, COFFER_CONSENT_HOST: '::1' })).toHaveLength(1)
  })

  it('production with TLS, or a proxy declared to terminate it: none', async () => {
    const env = { COFFER_ENV: 'production', COFFER_HOST: '0.0.0.0' }
    expect(await problems({ ...env, ...PAIR })).toEqual([])
    expect(
      await problems({ ...env, COFFER_TLS_TERMINATED_BY_PROXY: 'true', COFFER_TRUST_PROXY: '1' }),
    ).toEqual([])
    // The consent listener's own pair covers it alone.
    const consentOnly = await problems({
      ...env,
      COFFER_CONSENT_TLS_CERT_FILE: '/c.pem',
      COFFER_CONSENT_TLS_KEY_FILE: '/k.pem',
    })
    expect(consentOnly).toHaveLength(1)
    expect(consentOnly[0]).toMatch(/^COFFER_HOST is/)
  })

  it('production on loopback: plain HTTP is fine', async () => {
    for (const host of ['127.0.0.1', '::1', 'localhost'])
      expect(await problems({ COFFER_ENV: 'production', COFFER_HOST: host }), host).toEqual([])
  })

  it('the metrics listener off loopback in production asks for its token', async () => {
    const env = { COFFER_ENV: 'production', COFFER_METRICS_PORT: '9464' }
    expect(await problems(env)).toEqual([])
    const exposed = await problems({ ...env, COFFER_METRICS_HOST: '0.0.0.0' })
    expect(exposed).toHaveLength(1)
    expect(exposed[0]).toMatch(/set COFFER_METRICS_TOKEN, or keep COFFER_METRICS_HOST on loopback$/)
    expect(
      await problems({
        ...env,
        COFFER_METRICS_HOST: '0.0.0.0',
        COFFER_METRICS_TOKEN: 'm'.repeat(32),
      }),
    ).toEqual([])
    // A token without a port of its own: /metrics rides the API listeners (and their TLS).
    expect(
      await problems({ COFFER_ENV: 'production', COFFER_METRICS_TOKEN: 'm'.repeat(32) }),
    ).toEqual([])
  })
})
