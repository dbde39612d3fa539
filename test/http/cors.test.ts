import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { basicHeader } from '../helpers/app.js'
import {
  buildConsentTestApp,
  CONSENT,
  type ConsentTestApp,
  emailQuery,
} from '../helpers/consent.js'
import { startTestServer, type TestServer } from '../helpers/server.js'

/**
 * Issue 11, item 3: a browser page on another origin could not use Coffer (a preflight answered
 * 404). Both listeners now answer CORS for the origins an operator lists, and only for those;
 * credentials are still required by every route that required them. Real sockets: what a
 * browser sends, byte for byte (Origin, Access-Control-Request-*).
 */
const APP = 'https://app.example.com'
const SHOP = 'https://my-shop.myshopify.com'
const EVIL = 'https://evil.example'

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

function send(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string | Buffer,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      )
    })
    req.on('error', reject)
    req.end(body)
  })
}

const preflight = (origin: string, method: string, requestHeaders?: string) => ({
  origin,
  'access-control-request-method': method,
  ...(requestHeaders ? { 'access-control-request-headers': requestHeaders } : {}),
})

/** The security headers every answer carries (decisions.md 24), preflights included. */
function expectSecurityHeaders(res: Answer) {
  expect(res.headers['cache-control']).toBe('no-store')
  expect(res.headers['x-content-type-options']).toBe('nosniff')
}

function expectVaryOrigin(res: Answer) {
  expect(String(res.headers.vary ?? '').toLowerCase()).toContain('origin')
}

function expectNoCors(res: Answer) {
  for (const name of Object.keys(res.headers))
    expect(name.startsWith('access-control-'), name).toBe(false)
}

/** The setting as `coffer serve` reads it from the environment. */
const corsFromEnv = loadConfig({
  COFFER_CORS_ORIGINS: `${APP}, http://localhost:3000`,
  COFFER_CONSENT_CORS_ORIGINS: 'https://*.myshopify.com,https://privacy.example.com',
}).cors

describe('main API with COFFER_CORS_ORIGINS (real sockets)', () => {
  let server: TestServer
  let port: number
  beforeAll(async () => {
    server = await startTestServer({
      cors: { origins: corsFromEnv.origins, maxAgeSeconds: corsFromEnv.maxAgeSeconds },
    })
    port = (server.testApp.app.server.address() as AddressInfo).port
  })
  afterAll(() => server.close())
  const auth = () => ({ authorization: basicHeader(server.admin.api_key) })

  it('answers a listed origin’s preflight without credentials: 204, methods, headers, max age', async () => {
    const res = await send(
      port,
      'OPTIONS',
      '/v1/vaults',
      preflight(APP, 'POST', 'authorization,content-type'),
    )
    expect(res.status, res.body).toBe(204)
    expect(res.headers['access-control-allow-origin']).toBe(APP)
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST, PUT, DELETE, OPTIONS')
    expect(res.headers['access-control-allow-headers']).toBe(
      'Authorization, Content-Type, Content-Disposition',
    )
    expect(res.headers['access-control-max-age']).toBe('7200')
    expect(res.headers['access-control-allow-credentials']).toBeUndefined()
    expect(res.body).toBe('')
    expectVaryOrigin(res)
    expectSecurityHeaders(res)
    // The other listed origin too, and a preflight for a path no route serves (the actual
    // request then answers its own 404, readable by the page).
    const other = await send(
      port,
      'OPTIONS',
      '/v1/nowhere',
      preflight('http://localhost:3000', 'PUT'),
    )
    expect(other.status).toBe(204)
    expect(other.headers['access-control-allow-origin']).toBe('http://localhost:3000')
  })

  it('refuses an unlisted origin’s preflight with 403 in the envelope and no CORS header', async () => {
    for (const origin of [EVIL, `${APP}.evil.example`, 'http://app.example.com', 'null']) {
      const res = await send(port, 'OPTIONS', '/v1/vaults', preflight(origin, 'GET'))
      expect(res.status, origin).toBe(403)
      expect(res.headers['content-type']).toMatch(/^application\/json/)
      expect(JSON.parse(res.body).error).toEqual({
        message: 'This origin is not allowed to call the API from a browser (COFFER_CORS_ORIGINS)',
        type: 'authorization_error',
        code: 'ORIGIN_NOT_ALLOWED',
      })
      expect(res.headers['access-control-allow-origin']).toBeUndefined()
      expect(res.headers['access-control-allow-methods']).toBeUndefined()
      expectVaryOrigin(res)
      expectSecurityHeaders(res)
    }
  })

  it('serves no other OPTIONS: without Origin it is the 404 it was', async () => {
    for (const headers of [{}, { origin: EVIL }] as Record<string, string>[]) {
      const res = await send(port, 'OPTIONS', '/v1/vaults', headers)
      expect(res.status).toBe(404)
      expect(JSON.parse(res.body).error.code).toBe('ROUTE_NOT_FOUND')
      expect(res.headers['access-control-allow-origin']).toBeUndefined()
    }
    // A listed origin's OPTIONS without Access-Control-Request-Method: answered as a preflight
    // (not the plugin's text/plain 400, which is outside the envelope).
    const listed = await send(port, 'OPTIONS', '/v1/vaults', { origin: APP })
    expect(listed.status).toBe(204)
    expect(listed.headers['access-control-allow-origin']).toBe(APP)
  })

  it('names a listed origin on actual requests, successes and errors alike', async () => {
    const ok = await send(port, 'GET', '/v1/vaults', { origin: APP, ...auth() })
    expect(ok.status, ok.body).toBe(200)
    expect(ok.headers['access-control-allow-origin']).toBe(APP)
    expect(ok.headers['access-control-expose-headers']).toBe(
      'Content-Disposition, Content-Type, Content-Length, Retry-After',
    )
    expectVaryOrigin(ok)
    expectSecurityHeaders(ok)
    // Errors are readable by the page too: a missing credential, a validation error, no route.
    const errorsOf = [
      await send(port, 'GET', '/v1/vaults', { origin: APP }),
      await send(
        port,
        'POST',
        '/v1/vaults',
        { origin: APP, ...auth(), 'content-type': 'application/json' },
        '{}',
      ),
      await send(port, 'GET', '/v1/nowhere', { origin: APP, ...auth() }),
      await send(
        port,
        'POST',
        '/v1/vaults',
        { origin: APP, ...auth(), 'content-type': 'application/json' },
        JSON.stringify({ name: 'x'.repeat(1_048_576) }),
      ),
    ]
    expect(errorsOf.map((r) => r.status)).toEqual([401, 400, 404, 413])
    for (const res of errorsOf) {
      expect(JSON.parse(res.body).result).toBe('error')
      expect(res.headers['access-control-allow-origin']).toBe(APP)
      expectVaryOrigin(res)
      expectSecurityHeaders(res)
    }
  })

  it('does not weaken authentication: a listed origin without a credential is refused', async () => {
    const res = await send(port, 'DELETE', `/v1/users/${server.admin.userId}`, { origin: APP })
    expect(res.status).toBe(401)
    expect(JSON.parse(res.body).error.type).toBe('authentication_error')
  })

  it('never names an unlisted origin on actual requests (the browser then hides the answer)', async () => {
    const res = await send(port, 'GET', '/v1/vaults', { origin: EVIL, ...auth() })
    expect(res.status).toBe(200)
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
    expect(res.headers['access-control-expose-headers']).toBeUndefined()
    expectVaryOrigin(res)
  })

  it('exposes Content-Disposition on a BLOB download (the official SDK reads the filename)', async () => {
    const base = `http://127.0.0.1:${port}`
    const vault = (await fetch(`${base}/v1/vaults`, {
      method: 'POST',
      headers: auth(),
      body: new URLSearchParams({ name: 'cors' }),
    }).then((r) => r.json())) as { vault: { id: string } }
    const form = new FormData()
    form.append('file', new Blob([Buffer.from('hello')]), 'hello.txt')
    const up = (await fetch(`${base}/v1/vaults/${vault.vault.id}/blobs`, {
      method: 'POST',
      headers: auth(),
      body: form,
    }).then((r) => r.json())) as { blob_id: string }
    const down = await send(port, 'GET', `/v1/vaults/${vault.vault.id}/blobs/${up.blob_id}`, {
      origin: APP,
      ...auth(),
    })
    expect(down.status, down.body).toBe(200)
    expect(down.body).toBe('hello')
    expect(down.headers['content-disposition']).toMatch(/hello\.txt/)
    expect(down.headers['access-control-allow-origin']).toBe(APP)
    expect(String(down.headers['access-control-expose-headers'])).toMatch(/Content-Disposition/)
  })
})

describe('main API without COFFER_CORS_ORIGINS (the default)', () => {
  let server: TestServer
  let port: number
  beforeAll(async () => {
    server = await startTestServer({})
    port = (server.testApp.app.server.address() as AddressInfo).port
  })
  afterAll(() => server.close())

  it('sends no CORS header at all and serves no preflight', async () => {
    const pre = await send(port, 'OPTIONS', '/v1/vaults', preflight(APP, 'GET'))
    expect(pre.status).toBe(404)
    expectNoCors(pre)
    const res = await send(port, 'GET', '/v1/vaults', {
      origin: APP,
      authorization: basicHeader(server.admin.api_key),
    })
    expect(res.status).toBe(200)
    expectNoCors(res)
  })
})

describe('consent API with COFFER_CONSENT_CORS_ORIGINS (real sockets)', () => {
  let t: ConsentTestApp
  let port: number
  beforeAll(async () => {
    t = await buildConsentTestApp({
      cors: { origins: corsFromEnv.consentOrigins, maxAgeSeconds: corsFromEnv.maxAgeSeconds },
      rateLimit: { perAddress: 1000, perShop: 3, windowSeconds: 60 },
    })
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    port = (t.app.server.address() as AddressInfo).port
  })
  afterAll(() => t.close())
  const query = (shop = 'cors.example') =>
    `${CONSENT}?${new URLSearchParams(emailQuery(`c-${Math.random()}@example.com`, shop))}`

  it('answers the preflight of a storefront JSON POST from a shop origin', async () => {
    for (const origin of [SHOP, 'https://privacy.example.com']) {
      const res = await send(port, 'OPTIONS', CONSENT, preflight(origin, 'POST', 'content-type'))
      expect(res.status, origin).toBe(204)
      expect(res.headers['access-control-allow-origin']).toBe(origin)
      expect(res.headers['access-control-allow-methods']).toBe('GET, POST, OPTIONS')
      expect(res.headers['access-control-allow-headers']).toBe('Content-Type')
      expect(res.headers['access-control-max-age']).toBe('7200')
      expect(res.headers['access-control-allow-credentials']).toBeUndefined()
      expectVaryOrigin(res)
      expectSecurityHeaders(res)
    }
  })

  it('refuses other origins’ preflights with 403 in the consent body, no CORS header', async () => {
    for (const origin of [
      EVIL,
      'https://myshopify.com',
      'https://a.b.myshopify.com',
      'http://my-shop.myshopify.com',
      'https://my-shop.myshopify.com.evil.example',
    ]) {
      const res = await send(port, 'OPTIONS', CONSENT, preflight(origin, 'POST'))
      expect(res.status, origin).toBe(403)
      expect(JSON.parse(res.body)).toEqual({ error: 'Origin not allowed' })
      expect(res.headers['access-control-allow-origin']).toBeUndefined()
      expectVaryOrigin(res)
      expectSecurityHeaders(res)
    }
  })

  it('names the shop origin on answers, errors and flood refusals included', async () => {
    const ok = await send(port, 'GET', query(), { origin: SHOP })
    expect(ok.status, ok.body).toBe(200)
    expect(ok.headers['access-control-allow-origin']).toBe(SHOP)
    expectVaryOrigin(ok)
    const post = await send(
      port,
      'POST',
      CONSENT,
      { origin: SHOP, 'content-type': 'application/json' },
      JSON.stringify({ jwt: JSON.parse(ok.body).jwt, optedOut: true }),
    )
    expect(post.status, post.body).toBe(200)
    expect(post.headers['access-control-allow-origin']).toBe(SHOP)
    const bad = await send(port, 'GET', `${CONSENT}?provider=email`, { origin: SHOP })
    expect(bad.status).toBe(400)
    expect(bad.headers['access-control-allow-origin']).toBe(SHOP)
    expectSecurityHeaders(bad)
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      const res = await send(port, 'GET', query('flooded.example'), { origin: SHOP })
      statuses.push(res.status)
      expect(res.headers['access-control-allow-origin']).toBe(SHOP)
      if (res.status === 429)
        expect(res.headers['access-control-expose-headers']).toMatch(/Retry-After/)
    }
    expect(statuses).toEqual([200, 200, 200, 429])
    const unlisted = await send(port, 'GET', query(), { origin: EVIL })
    expect(unlisted.status).toBe(200)
    expect(unlisted.headers['access-control-allow-origin']).toBeUndefined()
  })
})

describe('consent API without COFFER_CONSENT_CORS_ORIGINS (the default: App Proxy, same origin)', () => {
  let t: ConsentTestApp
  let port: number
  beforeAll(async () => {
    t = await buildConsentTestApp({})
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    port = (t.app.server.address() as AddressInfo).port
  })
  afterAll(() => t.close())

  it('sends no CORS header at all; an OPTIONS is the 404 it was', async () => {
    const pre = await send(port, 'OPTIONS', CONSENT, preflight(SHOP, 'POST'))
    expect(pre.status).toBe(404)
    expect(JSON.parse(pre.body)).toEqual({ error: 'Not found' })
    expectNoCors(pre)
    const res = await send(
      port,
      'GET',
      `${CONSENT}?${new URLSearchParams(emailQuery('x@example.com'))}`,
      { origin: SHOP },
    )
    expect(res.status).toBe(200)
    expectNoCors(res)
  })
})
