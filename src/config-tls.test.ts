import { resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'
import { DEFAULT_HSTS_MAX_AGE_SECONDS, MAX_HSTS_MAX_AGE_SECONDS } from './config-tls.js'

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return e.problems
    throw e
  }
  throw new Error('expected a ConfigError')
}

const PAIR = {
  COFFER_TLS_CERT_FILE: '/etc/coffer/cert.pem',
  COFFER_TLS_KEY_FILE: '/etc/coffer/key.pem',
}

describe('config: TLS (issue 19)', () => {
  it('defaults: plain HTTP, HSTS one year, no client certificates, files watched', () => {
    expect(loadConfig({}).tls).toEqual({
      api: undefined,
      consent: undefined,
      clientAuth: undefined,
      hstsMaxAgeSeconds: 31_536_000,
      terminatedByProxy: false,
      watchFiles: true,
    })
    expect(DEFAULT_HSTS_MAX_AGE_SECONDS).toBe(365 * 86_400)
  })

  it('one pair serves both listeners; relative paths are from the working directory', () => {
    const tls = loadConfig({
      COFFER_TLS_CERT_FILE: 'tls/cert.pem',
      COFFER_TLS_KEY_FILE: ' /k.pem ',
    }).tls
    const api = {
      certFile: resolve('tls/cert.pem'),
      keyFile: '/k.pem',
      certSetting: 'COFFER_TLS_CERT_FILE',
      keySetting: 'COFFER_TLS_KEY_FILE',
    }
    expect(tls.api).toEqual(api)
    expect(tls.consent).toEqual(api)
  })

  it('the consent listener takes its own pair, with or without the main one', () => {
    const own = {
      COFFER_CONSENT_TLS_CERT_FILE: '/c/cert.pem',
      COFFER_CONSENT_TLS_KEY_FILE: '/c/key.pem',
    }
    const consent = {
      certFile: '/c/cert.pem',
      keyFile: '/c/key.pem',
      certSetting: 'COFFER_CONSENT_TLS_CERT_FILE',
      keySetting: 'COFFER_CONSENT_TLS_KEY_FILE',
    }
    expect(loadConfig({ ...PAIR, ...own }).tls).toMatchObject({
      api: { certFile: '/etc/coffer/cert.pem' },
      consent,
    })
    expect(loadConfig(own).tls).toMatchObject({ api: undefined, consent })
  })

  it('a certificate without its key (or a key without its certificate) is refused', () => {
    for (const [given, names] of [
      [{ COFFER_TLS_CERT_FILE: '/c.pem' }, 'COFFER_TLS_CERT_FILE and COFFER_TLS_KEY_FILE'],
      [
        { COFFER_TLS_KEY_FILE: '/k.pem', COFFER_TLS_CERT_FILE: ' ' },
        'COFFER_TLS_CERT_FILE and COFFER_TLS_KEY_FILE',
      ],
      [
        { COFFER_CONSENT_TLS_KEY_FILE: '/k.pem' },
        'COFFER_CONSENT_TLS_CERT_FILE and COFFER_CONSENT_TLS_KEY_FILE',
      ],
    ] as const) {
      expect(problems(given)).toEqual([
        `${names} go together: give both (the certificate chain and its key, PEM), or neither`,
      ])
    }
  })

  it('COFFER_TLS_CLIENT_AUTH: require (the default with a CA) or optional', () => {
    const ca = { ...PAIR, COFFER_TLS_CLIENT_CA_FILE: 'clients-ca.pem' }
    expect(loadConfig(ca).tls.clientAuth).toEqual({
      caFile: resolve('clients-ca.pem'),
      mode: 'require',
    })
    for (const mode of ['require', 'optional'] as const)
      expect(loadConfig({ ...ca, COFFER_TLS_CLIENT_AUTH: mode }).tls.clientAuth?.mode).toBe(mode)
    for (const bad of ['Require', 'none', 'true', 'request'])
      expect(problems({ ...ca, COFFER_TLS_CLIENT_AUTH: bad }), bad).toEqual([
        'COFFER_TLS_CLIENT_AUTH must be require or optional',
      ])
  })

  it('client certificates need a CA, and TLS on the main API', () => {
    expect(problems({ ...PAIR, COFFER_TLS_CLIENT_AUTH: 'require' })).toEqual([
      'COFFER_TLS_CLIENT_AUTH needs COFFER_TLS_CLIENT_CA_FILE: the CA that issues the client certificates',
    ])
    expect(
      problems({
        COFFER_CONSENT_TLS_CERT_FILE: '/c.pem',
        COFFER_CONSENT_TLS_KEY_FILE: '/k.pem',
        COFFER_TLS_CLIENT_CA_FILE: '/ca.pem',
      }),
    ).toEqual([
      'COFFER_TLS_CLIENT_CA_FILE needs TLS on the main API (COFFER_TLS_CERT_FILE and COFFER_TLS_KEY_FILE)',
    ])
  })

  it(`COFFER_HSTS_MAX_AGE_SECONDS: 0 to ${MAX_HSTS_MAX_AGE_SECONDS}`, () => {
    const hsts = (v: string) => loadConfig({ COFFER_HSTS_MAX_AGE_SECONDS: v }).tls.hstsMaxAgeSeconds
    expect(hsts('0')).toBe(0)
    expect(hsts('63072000')).toBe(63_072_000)
    expect(hsts(' ')).toBe(31_536_000)
    for (const bad of ['-1', '63072001', '1.5', '1y', 'abc'])
      expect(problems({ COFFER_HSTS_MAX_AGE_SECONDS: bad }), bad).toEqual([
        'COFFER_HSTS_MAX_AGE_SECONDS must be an integer from 0 to 63072000',
      ])
  })

  it('COFFER_TLS_TERMINATED_BY_PROXY needs COFFER_TRUST_PROXY, and is true or false', () => {
    expect(
      loadConfig({ COFFER_TLS_TERMINATED_BY_PROXY: 'true', COFFER_TRUST_PROXY: '10.0.0.5' }).tls
        .terminatedByProxy,
    ).toBe(true)
    expect(
      loadConfig({ COFFER_TLS_TERMINATED_BY_PROXY: '1', COFFER_TRUST_PROXY: '2' }).tls
        .terminatedByProxy,
    ).toBe(true)
    expect(loadConfig({ COFFER_TLS_TERMINATED_BY_PROXY: 'false' }).tls.terminatedByProxy).toBe(
      false,
    )
    const needsProxy =
      'COFFER_TLS_TERMINATED_BY_PROXY=true needs COFFER_TRUST_PROXY: the address (or hop count) of the proxy that terminates TLS'
    expect(problems({ COFFER_TLS_TERMINATED_BY_PROXY: 'true' })).toEqual([needsProxy])
    expect(
      problems({ COFFER_TLS_TERMINATED_BY_PROXY: 'yes', COFFER_TRUST_PROXY: 'false' }),
    ).toEqual([needsProxy])
    expect(problems({ COFFER_TLS_TERMINATED_BY_PROXY: 'sure', COFFER_TRUST_PROXY: '1' })).toEqual([
      'COFFER_TLS_TERMINATED_BY_PROXY must be true or false',
    ])
  })

  it('COFFER_TLS_WATCH: on unless false', () => {
    expect(loadConfig({ COFFER_TLS_WATCH: '' }).tls.watchFiles).toBe(true)
    expect(loadConfig({ COFFER_TLS_WATCH: 'true' }).tls.watchFiles).toBe(true)
    expect(loadConfig({ COFFER_TLS_WATCH: 'false' }).tls.watchFiles).toBe(false)
    expect(loadConfig({ COFFER_TLS_WATCH: '0' }).tls.watchFiles).toBe(false)
    expect(problems({ COFFER_TLS_WATCH: 'off' })).toEqual([
      'COFFER_TLS_WATCH must be true or false',
    ])
  })

  it('lists every TLS problem at once, never quoting a file', () => {
    const found = problems({
      COFFER_TLS_CERT_FILE: '/c.pem',
      COFFER_TLS_CLIENT_AUTH: 'maybe',
      COFFER_HSTS_MAX_AGE_SECONDS: '-5',
      COFFER_TLS_TERMINATED_BY_PROXY: 'true',
    })
    expect(found).toHaveLength(5)
    expect(loadConfig(PAIR).tls.api?.certFile).toBe('/etc/coffer/cert.pem')
    expect(Object.isFrozen(loadConfig(PAIR).tls)).toBe(true)
  })
})
