import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import {
  buildConsentTestApp,
  type ConsentTestApp,
  claimsOf,
  expectConsentError,
  proxySign,
  recordOf,
} from '../helpers/consent.js'

/**
 * Issue 10, finding 13: the App Proxy's signed text joins `k=v` entries without a separator, so
 * an anonymous signed request `…&logged_in_customer_id=&n=X…` could be re-sent as
 * `logged_in_customer_id=n%3DX` with the same signature and got a token for customer `n=X`.
 */
const SECRET = 'app proxy shared secret'
const NOW = '2026-06-01T08:00:00.000Z'
const T = Math.floor(new Date(NOW).getTime() / 1000)
const FAILED = 'Request signature verification failed'
const NOT_NUMERIC = 'logged_in_customer_id must be a numeric Shopify customer id'
const NOT_LOGGED_IN = 'Customer must be logged in to access this endpoint'

/** The storefront's parameters, then what the App Proxy appends, in its order. */
const proxied = (customer: string, extra = '') =>
  `privacy_center_id=pc-7&provider=storefront${extra}&shop=store-one.myshopify.com` +
  `&logged_in_customer_id=${customer}&path_prefix=%2Fapps%2Ftruevault&timestamp=${T}`

const signatureOf = (query: string) => new URLSearchParams(query).get('signature') as string

describe('storefront signatures cannot be re-split (production)', () => {
  let t: ConsentTestApp

  beforeAll(async () => {
    t = await buildConsentTestApp({
      production: true,
      storefrontSecret: SECRET,
      clock: new ManualClock(NOW),
    })
  })
  afterAll(() => t.close())

  it('the exact attack: an anonymous signed request re-sent as customer `n=X` is refused', async () => {
    const anonymous = proxySign(proxied('', '&n=X'), SECRET)
    // As signed: nobody is logged in.
    expectConsentError(await t.get(anonymous), 401, NOT_LOGGED_IN)
    // The same signature over the re-split query (its signed text is byte for byte the same).
    const forged = `${proxied('n%3DX')}&signature=${signatureOf(anonymous)}`
    expect(proxySign(proxied('n%3DX'), SECRET)).toBe(forged)
    expectConsentError(await t.get(forged), 400, NOT_NUMERIC)
    const records = await t.store.db.selectFrom('consent_records').select('shop').execute()
    expect(records).toHaveLength(0)
  })

  it('a signed key or value holding `=` or `&` fails verification, whatever it is', async () => {
    for (const extra of ['&q=a%3Db', '&q=a%26b', '&n%3DX=1', '&a%26b=1']) {
      expectConsentError(await t.get(proxySign(proxied('1001', extra), SECRET)), 401, FAILED)
    }
    // Re-splitting an unread parameter into another one: `n=X` + `path_prefix=…` as one value.
    const signed = proxySign(proxied('1001', '&n=X'), SECRET)
    const moved = signed
      .replace('&n=X', '&n=Xpath_prefix%3D%2Fapps%2Ftruevault')
      .replace('&path_prefix=%2Fapps%2Ftruevault', '')
    expectConsentError(await t.get(moved), 401, FAILED)
    // The honest requests still work.
    const record = recordOf(await t.get(signed))
    expect(claimsOf(record.jwt).consumerIdentifier).toBe('1001')
  })

  it('a POST through the App Proxy is held to the same rules', async () => {
    const { jwt } = recordOf(await t.get(proxySign(proxied('1002'), SECRET)))
    const res = await t.post(
      { jwt, optedOut: true },
      { query: proxySign(proxied('1002', '&q=a%3Db'), SECRET) },
    )
    expectConsentError(res, 401, FAILED)
  })
})
