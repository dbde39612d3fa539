import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TEST_CONSENT_SECRET } from '../helpers/consent.js'
import {
  cofferFails,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from '../helpers/processes.js'

/**
 * Issue 11, item 3, as deployed: `coffer serve` reads COFFER_CORS_ORIGINS and
 * COFFER_CONSENT_CORS_ORIGINS and applies each to its own listener; a bad value stops the
 * start. (fetch may set Origin outside a browser: Node does not forbid it.)
 */
describe('coffer serve with CORS settings', () => {
  let db: SharedDatabase
  let server: ServerProcess
  let consentUrl = ''

  beforeAll(async () => {
    db = await sharedDatabase()
    server = await startServerProcess({
      ...db.env(db.dataDir()),
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
      COFFER_CORS_ORIGINS: 'https://app.example.com',
      COFFER_CONSENT_CORS_ORIGINS: 'https://*.myshopify.com',
      COFFER_CORS_MAX_AGE_SECONDS: '600',
    })
    for (let i = 0; i < 100 && !consentUrl; i++) {
      const m = /Consent API listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(server.output())
      if (m) consentUrl = m[1] as string
      else await new Promise((r) => setTimeout(r, 100))
    }
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  const preflight = (url: string, origin: string) =>
    fetch(url, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST' },
    })

  it('gives each listener its own origins and the configured max age', async () => {
    const api = await preflight(`${server.url}/v1/vaults`, 'https://app.example.com')
    expect(api.status).toBe(204)
    expect(api.headers.get('access-control-allow-origin')).toBe('https://app.example.com')
    expect(api.headers.get('access-control-max-age')).toBe('600')
    expect((await preflight(`${server.url}/v1/vaults`, 'https://s.myshopify.com')).status).toBe(403)

    const consent = await preflight(`${consentUrl}/api/v1/cmp/consent`, 'https://s.myshopify.com')
    expect(consent.status).toBe(204)
    expect(consent.headers.get('access-control-allow-origin')).toBe('https://s.myshopify.com')
    const other = await preflight(`${consentUrl}/api/v1/cmp/consent`, 'https://app.example.com')
    expect(other.status).toBe(403)
  })

  it('refuses to start with an origin that is not one', async () => {
    const failed = await cofferFails(['serve'], {
      ...db.env(db.dataDir()),
      COFFER_SERVE: 'api',
      COFFER_PORT: '0',
      COFFER_CORS_ORIGINS: 'https://app.example.com/',
    })
    expect(failed.code).not.toBe(0)
    expect(failed.stderr + failed.stdout).toContain(
      'COFFER_CORS_ORIGINS entry "https://app.example.com/"',
    )
  })
})
