import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import {
  buildConsentTestApp,
  type ConsentTestApp,
  claimsOf,
  emailQuery,
  expectConsentError,
  proxySign,
  recordOf,
} from '../helpers/consent.js'

const SECRET = 'app proxy shared secret'
const NOW = '2026-06-01T08:00:00.000Z'
const nowSeconds = () => Math.floor(new Date(NOW).getTime() / 1000)
const FAILED = 'Request signature verification failed'
const NOT_LOGGED_IN = 'Customer must be logged in to access this endpoint'

/** What the storefront script sends plus what the App Proxy appends (in its order). */
function proxied(customer: string, extra = '', timestamp = nowSeconds()): string {
  return (
    `privacy_center_id=pc-7&provider=storefront&client_id=3b241101-e2bb-4255-8caf-4136c566a962${extra}` +
    `&shop=store-one.myshopify.com&logged_in_customer_id=${customer}` +
    `&path_prefix=%2Fapps%2Ftruevault&timestamp=${timestamp}`
  )
}

describe('storefront signatures in production', () => {
  let t: ConsentTestApp

  beforeAll(async () => {
    t = await buildConsentTestApp({
      production: true,
      storefrontSecret: SECRET,
      clock: new ManualClock(NOW),
    })
  })
  afterAll(() => t.close())

  it('accepts a request signed by the App Proxy', async () => {
    const record = recordOf(await t.get(proxySign(proxied('1001'), SECRET)))
    expect(record.isExisting).toBe(false)
    expect(claimsOf(record.jwt)).toMatchObject({
      consumerIdentifier: '1001',
      consumerPartition: 'store-one.myshopify.com',
    })
  })

  it('signs application parameters too, repeated ones merged', async () => {
    recordOf(await t.get(proxySign(proxied('1002', '&extra=1&extra=2&q=a+b%2Fc'), SECRET)))
  })

  it('refuses a missing, wrong or re-used signature', async () => {
    expectConsentError(await t.get(proxied('1003')), 401, FAILED)
    expectConsentError(await t.get(proxySign(proxied('1003'), 'another secret')), 401, FAILED)
    const signed = proxySign(proxied('1003'), SECRET)
    // The same signature on another customer's request.
    expectConsentError(
      await t.get(signed.replace('customer_id=1003', 'customer_id=1004')),
      401,
      FAILED,
    )
    // A parameter added after signing.
    expectConsentError(await t.get(`${signed}&privacy_center=other`), 401, FAILED)
  })

  it('refuses a signature in upper case (the App Proxy sends lower-case hex)', async () => {
    const signed = proxySign(proxied('1005'), SECRET)
    const upper = signed.replace(
      /signature=([0-9a-f]+)$/,
      (_m, hex: string) => `signature=${hex.toUpperCase()}`,
    )
    expectConsentError(await t.get(upper), 401, FAILED)
  })

  it('refuses a timestamp more than 90 seconds away, either way', async () => {
    const at = (offset: number) => proxySign(proxied('1006', '', nowSeconds() + offset), SECRET)
    recordOf(await t.get(at(-90)))
    recordOf(await t.get(at(90)))
    expectConsentError(await t.get(at(-91)), 401, FAILED)
    expectConsentError(await t.get(at(91)), 401, FAILED)
    expectConsentError(await t.get(at(-86_400)), 401, FAILED)
  })

  it('goes stale as the clock moves on', async () => {
    const signed = proxySign(proxied('1007'), SECRET)
    recordOf(await t.get(signed))
    t.clock.advance(91_000)
    try {
      expectConsentError(await t.get(signed), 401, FAILED)
    } finally {
      t.clock.set(NOW)
    }
  })

  it('refuses a request without a timestamp even when signed', async () => {
    const query = proxied('1008').replace(/&timestamp=\d+/, '')
    expectConsentError(await t.get(proxySign(query, SECRET)), 401, FAILED)
  })

  it('refuses repeated shop, timestamp, signature and customer id before anything is read', async () => {
    // A visitor appending their own `logged_in_customer_id`: the proxy appends the real one,
    // signing `7,1009`; reading either alone would be wrong.
    const smuggled = proxySign(
      `privacy_center_id=pc-7&provider=storefront&logged_in_customer_id=7&shop=store-one.myshopify.com&logged_in_customer_id=1009&timestamp=${nowSeconds()}`,
      SECRET,
    )
    expectConsentError(await t.get(smuggled), 400, 'logged_in_customer_id must not be repeated')
    const base = proxied('1009')
    expectConsentError(
      await t.get(proxySign(`${base}&shop=evil.myshopify.com`, SECRET)),
      400,
      'shop must not be repeated',
    )
    expectConsentError(
      await t.get(proxySign(`${base}&timestamp=${nowSeconds()}`, SECRET)),
      400,
      'timestamp must not be repeated',
    )
    const once = proxySign(base, SECRET)
    const signature = /signature=([0-9a-f]+)$/.exec(once)?.[1]
    expectConsentError(
      await t.get(`${once}&signature=${signature}`),
      400,
      'signature must not be repeated',
    )
  })

  it('checks the signature before the logged-in customer', async () => {
    expectConsentError(await t.get(proxySign(proxied(''), SECRET)), 401, NOT_LOGGED_IN)
    expectConsentError(await t.get(proxied('')), 401, FAILED)
  })

  it('checks the spec’s 400 rules before the signature', async () => {
    const query = proxied('1010').replace('privacy_center_id=pc-7&', '')
    expectConsentError(await t.get(query), 400, 'Privacy center ID is required')
  })

  it('does not ask the email provider for a signature', async () => {
    recordOf(await t.get(emailQuery('prod@example.com')))
  })

  it('checks the signature of a POST that came through the App Proxy', async () => {
    const { jwt } = recordOf(await t.get(proxySign(proxied('1011'), SECRET)))
    const query = `shop=store-one.myshopify.com&logged_in_customer_id=1011&timestamp=${nowSeconds()}`
    recordOf(await t.post({ jwt, consentAnalytics: true }, { query: proxySign(query, SECRET) }))
    expectConsentError(
      await t.post({ jwt, consentAnalytics: false }, { query: proxySign(query, 'wrong') }),
      401,
      FAILED,
    )
    // Signed, but through another shop than the token's.
    const other = query.replace('store-one', 'store-two')
    expectConsentError(
      await t.post({ jwt, consentAnalytics: false }, { query: proxySign(other, SECRET) }),
      404,
      'No valid consent record exists for the provided JWT',
    )
    // The token alone (no proxy parameters) is enough, as the spec says.
    expect(recordOf(await t.post({ jwt, consentAnalytics: false })).consentAnalytics).toBe(false)
  })
})

describe('storefront in production without a shared secret', () => {
  let t: ConsentTestApp
  beforeAll(async () => {
    t = await buildConsentTestApp({ production: true, clock: new ManualClock(NOW) })
  })
  afterAll(() => t.close())

  it('answers 500 with the spec’s message to storefront requests only', async () => {
    const message = 'storefront API secret is not configured'
    expectConsentError(await t.get(proxySign(proxied('2001'), SECRET)), 500, message)
    expectConsentError(await t.get(proxied('2001')), 500, message)
    recordOf(await t.get(emailQuery('still-works@example.com')))
  })
})

describe('storefront in development', () => {
  let t: ConsentTestApp
  beforeAll(async () => {
    t = await buildConsentTestApp({ storefrontSecret: SECRET, clock: new ManualClock(NOW) })
  })
  afterAll(() => t.close())

  it('does not check signatures or timestamps, but still needs the customer', async () => {
    recordOf(await t.get(proxied('3001')))
    recordOf(await t.get(`${proxied('3001', '', 1)}&signature=${'0'.repeat(64)}`))
    expectConsentError(await t.get(proxied('')), 401, NOT_LOGGED_IN)
  })
})
