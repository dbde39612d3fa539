import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConsoleAssets, MAX_CONSOLE_BYTES } from '../../src/modules/console/console.assets.js'
import { CONSOLE_CSP } from '../../src/modules/console/console.routes.js'
import { basicHeader, buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * Issue 15: Coffer serves the console's build at /console, with its security headers, long-cache
 * hashed assets and the client's routes answered with index.html, and starts without a build.
 */
const dir = mkdtempSync(join(tmpdir(), 'coffer-console-'))
const INDEX =
  '<!doctype html><html><head><script type="module" src="/console/assets/app-1a2b3c.js"></script></head><body></body></html>'
mkdirSync(join(dir, 'assets'))
writeFileSync(join(dir, 'index.html'), INDEX)
writeFileSync(join(dir, 'assets/app-1a2b3c.js'), 'console.log(1)')
writeFileSync(join(dir, 'assets/style-9f8e7d.css'), 'body{}')
writeFileSync(join(dir, 'favicon.svg'), '<svg/>')

let built: TestApp
let unbuilt: TestApp
beforeAll(async () => {
  built = await buildTestApp({ consoleAssets: loadConsoleAssets(dir) })
  unbuilt = await buildTestApp({ consoleAssets: null })
})
afterAll(async () => {
  await built?.close()
  await unbuilt?.close()
  rmSync(dir, { recursive: true, force: true })
})

function expectSecured(headers: Record<string, unknown>) {
  expect(headers['content-security-policy']).toBe(CONSOLE_CSP)
  expect(headers['x-frame-options']).toBe('DENY')
  expect(headers['x-content-type-options']).toBe('nosniff')
  expect(headers['referrer-policy']).toBe('no-referrer')
}

describe('the console build is served at /console', () => {
  it.each(['/console', '/console/', '/console/users', '/console/vaults/1234/documents'])(
    '%s answers index.html, not cached, under the strict CSP',
    async (url) => {
      const res = await built.app.inject(url)
      expect(res.statusCode).toBe(200)
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8')
      expect(res.headers['cache-control']).toBe('no-cache')
      expect(res.body).toBe(INDEX)
      expectSecured(res.headers)
    },
  )

  it('the CSP is the strict one: own origin only, no inline code, never framed', () => {
    expect(CONSOLE_CSP).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    )
  })

  it('hashed assets are cached for a year, immutable, with their type', async () => {
    const js = await built.app.inject('/console/assets/app-1a2b3c.js')
    expect(js.statusCode).toBe(200)
    expect(js.body).toBe('console.log(1)')
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8')
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable')
    expectSecured(js.headers)
    const css = await built.app.inject('/console/assets/style-9f8e7d.css')
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8')
    expect(css.headers['cache-control']).toBe('public, max-age=31536000, immutable')
  })

  it('files outside assets/ are served but revalidated', async () => {
    const res = await built.app.inject('/console/favicon.svg')
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('image/svg+xml')
    expect(res.headers['cache-control']).toBe('no-cache')
  })

  it('a missing asset is a 404, never index.html; no path reaches outside the build', async () => {
    for (const url of [
      '/console/assets/app-000000.js',
      '/console/assets/../../package.json',
      '/console/assets/%2e%2e/%2e%2e/package.json',
    ]) {
      const res = await built.app.inject(url)
      expect(res.body, url).not.toContain('"name": "coffer"')
      if (res.statusCode === 200) expect(res.body, url).toBe(INDEX)
    }
    const missing = await built.app.inject('/console/assets/app-000000.js')
    expect(missing.statusCode).toBe(404)
    expect(missing.headers['cache-control']).toBe('no-store')
  })

  it('no path below /console answers a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 40 }), async (tail) => {
        const res = await built.app.inject(`/console/${encodeURI(tail)}`)
        expect(res.statusCode, tail).toBeLessThan(500)
      }),
      { numRuns: 300 },
    )
  })

  it('HEAD answers like GET without a body', async () => {
    const res = await built.app.inject({ method: 'HEAD', url: '/console/users' })
    expect(res.statusCode).toBe(200)
    expect(res.body).toBe('')
    expectSecured(res.headers)
  })

  it("the API's own answers carry none of the console's headers", async () => {
    const res = await built.api.get('/v1/vaults', { auth: built.admin.api_key })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-security-policy']).toBeUndefined()
    expect(res.headers['x-frame-options']).toBeUndefined()
    expect(res.headers['cache-control']).toBe('no-store')
  })

  it('console requests, with or without a credential, are neither audited nor metered', async () => {
    const auth = built.admin.api_key
    const day = new Date().toISOString().slice(0, 10)
    const events = async () =>
      (await built.api.get('/v1/audit_events', { auth, query: { per_page: '100' } })).json().data
        .items as { seq: number; operation: string }[]
    const usage = async () =>
      (
        await built.api.get(`/v1/accounts/${built.admin.account_id}/usage`, {
          auth,
          query: { from: day, to: day },
        })
      ).json().usage.totals
    const last = Math.max(0, ...(await events()).map((e) => e.seq))
    const usageBefore = await usage()
    const urls = [
      '/console',
      '/console/users',
      '/console/assets/app-1a2b3c.js',
      '/console/assets/gone.js',
    ]
    for (const url of urls) {
      for (const authorization of [basicHeader(auth), 'Basic d3Jvbmc6', undefined]) {
        const res = await built.app.inject({ url, headers: authorization ? { authorization } : {} })
        expect(res.statusCode, url).toBeLessThan(500)
      }
    }
    // Only this test's own reads of the trail and the usage were recorded since.
    const since = (await events()).filter((e) => e.seq > last).map((e) => e.operation)
    expect(since.length).toBeGreaterThan(0)
    expect(since.filter((o) => o !== 'audit_event.list' && o !== 'account_usage.read')).toEqual([])
    expect(await usage()).toEqual(usageBefore)
  })

  it('the console routes are not in the OpenAPI document', async () => {
    const doc = (await built.app.inject('/openapi.json')).json() as { paths: object }
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/console'))).toEqual([])
  })
})

describe('without a build', () => {
  it('the server starts and /console says how to build it (503), the API works', async () => {
    for (const url of ['/console', '/console/users', '/console/assets/app-1a2b3c.js']) {
      const res = await unbuilt.app.inject(url)
      expect(res.statusCode, url).toBe(503)
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8')
      expect(res.body).toContain('npm run build:console')
      expectSecured(res.headers)
    }
    const me = await unbuilt.api.get('/v1/auth/me', { auth: unbuilt.admin.api_key })
    expect(me.statusCode).toBe(200)
  })

  it('a folder without index.html is no build', () => {
    const empty = mkdtempSync(join(tmpdir(), 'coffer-console-empty-'))
    try {
      expect(loadConsoleAssets(empty)).toBeNull()
    } finally {
      rmSync(empty, { recursive: true, force: true })
    }
  })

  it(`a build over ${MAX_CONSOLE_BYTES} bytes is refused at startup`, () => {
    const big = mkdtempSync(join(tmpdir(), 'coffer-console-big-'))
    try {
      writeFileSync(join(big, 'index.html'), 'x')
      writeFileSync(join(big, 'huge.bin'), Buffer.alloc(MAX_CONSOLE_BYTES))
      expect(() => loadConsoleAssets(big)).toThrow(/over 8388608 bytes/)
    } finally {
      rmSync(big, { recursive: true, force: true })
    }
  })
})
