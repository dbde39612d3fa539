import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { buildConsentApp } from '../../src/consent-app.js'
import { buildTestApp, createUser, type TestAppOptions } from '../helpers/app.js'
import { startTestServer, type TestServer } from '../helpers/server.js'

/**
 * Security review, finding 12: behind a proxy that appends the address it saw, the entries a
 * client writes into X-Forwarded-For itself must never become its address (real sockets).
 */
const PASSWORD = 'correct horse battery'

let server: TestServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function start(options: TestAppOptions) {
  server = await startTestServer(options)
  const { port } = server.testApp.app.server.address() as AddressInfo
  return { t: server.testApp, base: `http://127.0.0.1:${port}` }
}

function login(base: string, form: Record<string, string>, forwardedFor: string) {
  return fetch(`${base}/v1/auth/login`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-forwarded-for': forwardedFor,
    },
    body: new URLSearchParams(form),
  }).then((r) => r.status)
}

const spoofed = (i: number) => `192.0.2.${i}`
/** The setting as `coffer serve` reads it from the environment. */
const trusting = (setting: string) => loadConfig({ COFFER_TRUST_PROXY: setting }).trustProxy

describe.each([
  // The old value: now one hop, the address the nearest proxy (here: the test, on loopback) saw.
  ['true', 'COFFER_TRUST_PROXY=true'],
  ['1', 'a hop count'],
  ['127.0.0.1', 'the proxy address'],
])('behind one proxy trusted by COFFER_TRUST_PROXY=%s (%s)', (setting) => {
  it('keys the per-client limit on the address the proxy saw, not the one the client wrote', async () => {
    const { t, base } = await start({ trustProxy: trusting(setting) })
    const user = await createUser(t, { password: PASSWORD })
    const guess = { account_id: t.admin.account_id, username: user.username, password: 'guess' }
    // The proxy appends the real client (198.51.100.7) after whatever the client sent.
    for (let i = 1; i <= 10; i++)
      expect(await login(base, guess, `${spoofed(i)}, 198.51.100.7`)).toBe(401)
    expect(await login(base, guess, `${spoofed(11)}, 198.51.100.7`)).toBe(429)
    // Another real client, even one claiming to be the first, is its own client.
    const right = { ...guess, password: PASSWORD }
    expect(await login(base, right, '198.51.100.7, 198.51.100.8')).toBe(200)
  })
})

describe('behind two proxies named by address', () => {
  it('takes the nearest address that is not a trusted proxy', async () => {
    const { t, base } = await start({
      trustProxy: trusting('127.0.0.1,10.0.0.2'),
    })
    const user = await createUser(t, { password: PASSWORD })
    const guess = { account_id: t.admin.account_id, username: user.username, password: 'guess' }
    for (let i = 1; i <= 10; i++)
      expect(await login(base, guess, `${spoofed(i)}, 198.51.100.9, 10.0.0.2`)).toBe(401)
    expect(await login(base, guess, `${spoofed(11)}, 198.51.100.9, 10.0.0.2`)).toBe(429)
  })
})

describe('without a trusted proxy (the default)', () => {
  it('ignores X-Forwarded-For entirely', async () => {
    const { t, base } = await start({})
    const user = await createUser(t, { password: PASSWORD })
    const guess = { account_id: t.admin.account_id, username: user.username, password: 'guess' }
    for (let i = 1; i <= 10; i++) expect(await login(base, guess, spoofed(i))).toBe(401)
    expect(await login(base, guess, spoofed(11))).toBe(429)
  })
})

describe('the consent listener', () => {
  it('takes the client address the same way', async () => {
    const t = await buildTestApp()
    try {
      const consent = await buildConsentApp(t.deps, { trustProxy: trusting('true') })
      // A probe route (consent routes must declare public access and an operation) that shows
      // the address.
      const config = { access: { public: true }, operation: 'consent.read' } as const
      consent.get('/client-address', { config }, async (request) => ({ ip: request.ip }))
      const res = await consent.inject({
        method: 'GET',
        url: '/client-address',
        remoteAddress: '127.0.0.1',
        headers: { 'x-forwarded-for': `${spoofed(1)}, 198.51.100.7` },
      })
      expect(res.json()).toEqual({ ip: '198.51.100.7' })
      await consent.close()
    } finally {
      await t.close()
    }
  })
})
