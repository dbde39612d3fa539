import { createHmac } from 'node:crypto'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  appProxySignature,
  canonicalQuery,
  parseQuery,
  type QueryPairs,
  verifyAppProxy,
} from './signature.js'

// Shopify's official App Proxy test vectors (shopify.dev, "Authenticate app proxies"), secret
// `hush`.
const SECRET = 'hush'
const LOGGED_IN =
  'extra=1&extra=2&shop=shop-name.myshopify.com&logged_in_customer_id=1&path_prefix=%2Fapps%2Fawesome_reviews&timestamp=1317327555'
const LOGGED_IN_SIGNATURE = '4c68c8624d737112c91818c11017d24d334b524cb5c2b8ba08daa056f7395ddb'
const ANONYMOUS = LOGGED_IN.replace('logged_in_customer_id=1', 'logged_in_customer_id=')
const ANONYMOUS_SIGNATURE = 'e072b6d7e6622d85912a5214b860d3100dc1e73d9bc29f43796ac8c9ff8093cb'
const VECTOR_TIME = 1317327555

const verify = (query: string, nowSeconds = VECTOR_TIME, maxSkewSeconds = 90) =>
  verifyAppProxy(parseQuery(query), { secret: SECRET, nowSeconds, maxSkewSeconds })

describe('App Proxy signature: the official vectors', () => {
  it('builds the documented canonical string', () => {
    expect(canonicalQuery(parseQuery(LOGGED_IN))).toBe(
      'extra=1,2logged_in_customer_id=1path_prefix=/apps/awesome_reviewsshop=shop-name.myshopify.comtimestamp=1317327555',
    )
  })

  it('computes both official signatures', () => {
    expect(appProxySignature(parseQuery(LOGGED_IN), SECRET)).toBe(LOGGED_IN_SIGNATURE)
    expect(appProxySignature(parseQuery(ANONYMOUS), SECRET)).toBe(ANONYMOUS_SIGNATURE)
  })

  it('verifies both vectors with their signature appended (or placed anywhere)', () => {
    expect(verify(`${LOGGED_IN}&signature=${LOGGED_IN_SIGNATURE}`)).toEqual({ ok: true })
    expect(verify(`${ANONYMOUS}&signature=${ANONYMOUS_SIGNATURE}`)).toEqual({ ok: true })
    expect(verify(`signature=${LOGGED_IN_SIGNATURE}&${LOGGED_IN}`)).toEqual({ ok: true })
  })

  it('keeps the empty logged_in_customer_id: dropping it changes the signature', () => {
    const dropped = ANONYMOUS.replace('&logged_in_customer_id=', '')
    expect(appProxySignature(parseQuery(dropped), SECRET)).not.toBe(ANONYMOUS_SIGNATURE)
    expect(verify(`${dropped}&signature=${ANONYMOUS_SIGNATURE}`)).toEqual({
      ok: false,
      reason: 'mismatch',
    })
  })

  it('refuses the vectors with the other signature, another secret or an altered value', () => {
    expect(verify(`${LOGGED_IN}&signature=${ANONYMOUS_SIGNATURE}`).ok).toBe(false)
    expect(
      verifyAppProxy(parseQuery(`${LOGGED_IN}&signature=${LOGGED_IN_SIGNATURE}`), {
        secret: 'hush!',
        nowSeconds: VECTOR_TIME,
        maxSkewSeconds: 90,
      }).ok,
    ).toBe(false)
    for (const altered of [
      LOGGED_IN.replace('logged_in_customer_id=1', 'logged_in_customer_id=2'),
      LOGGED_IN.replace('shop-name', 'other-shop'),
      LOGGED_IN.replace('extra=1&extra=2', 'extra=2&extra=1'),
      `${LOGGED_IN}&provider=storefront`,
    ]) {
      expect(verify(`${altered}&signature=${LOGGED_IN_SIGNATURE}`)).toEqual({
        ok: false,
        reason: 'mismatch',
      })
    }
  })

  it('does not match the `{shop}` placeholder of the current docs page (a known trap)', () => {
    const placeholder = LOGGED_IN.replace('shop-name', '{shop}')
    expect(appProxySignature(parseQuery(placeholder), SECRET)).not.toBe(LOGGED_IN_SIGNATURE)
  })
})

describe('App Proxy signature: the algorithm', () => {
  it('sorts whole key=value strings by byte order, not by key or localeCompare', () => {
    // localeCompare puts `consented` first; byte order puts `consentGiven` first (G < e).
    expect(
      canonicalQuery([
        ['consented', '1'],
        ['consentGiven', '2'],
      ]),
    ).toBe('consentGiven=2consented=1')
    // Sorting keys would put `a` first; sorting `k=v` strings puts `a-b=` first ('-' < '=').
    expect(
      canonicalQuery([
        ['a', 'x'],
        ['a-b', 'y'],
      ]),
    ).toBe('a-b=ya=x')
  })

  it('uses decoded values: `+` is a space, percent escapes decoded, UTF-8 byte order', () => {
    expect(canonicalQuery(parseQuery('q=a+b&p=%2Fx%2Fy&e=%E2%82%AC'))).toBe('e=€p=/x/yq=a b')
    // U+FF5E sorts after U+1F600's surrogates in UTF-16 but before it in UTF-8 bytes.
    const pairs: QueryPairs = [
      ['a😀', '1'],
      ['a～', '2'],
    ]
    expect(['a😀=1', 'a～=2'].sort()).toEqual(['a😀=1', 'a～=2'])
    expect(canonicalQuery(pairs)).toBe('a～=2a😀=1')
  })

  it('equals an independent HMAC of the canonical text for any parameters', () => {
    const pair = fc.tuple(fc.string({ minLength: 1 }), fc.string())
    fc.assert(
      fc.property(fc.array(pair, { maxLength: 8 }), fc.string({ minLength: 1 }), (pairs, key) => {
        const query = new URLSearchParams(pairs).toString()
        const parsed = parseQuery(query)
        const expected = createHmac('sha256', key).update(canonicalQuery(parsed)).digest('hex')
        expect(appProxySignature(parsed, key)).toBe(expected)
        expect(appProxySignature(parsed, key)).toMatch(/^[0-9a-f]{64}$/)
      }),
    )
  })

  it('ignores the order of distinct keys but not of a repeated key’s values', () => {
    const a: QueryPairs = [
      ['x', '1'],
      ['y', '2'],
    ]
    const b: QueryPairs = [
      ['y', '2'],
      ['x', '1'],
    ]
    expect(appProxySignature(a, SECRET)).toBe(appProxySignature(b, SECRET))
    expect(canonicalQuery(parseQuery('x=1&x=2'))).toBe('x=1,2')
    expect(canonicalQuery(parseQuery('x=2&x=1'))).toBe('x=2,1')
  })
})

describe('verifyAppProxy: refusals', () => {
  const signed = (query: string) =>
    `${query}&signature=${appProxySignature(parseQuery(query), SECRET)}`

  it('refuses a repeated shop, timestamp, signature, customer id or path prefix', () => {
    for (const extra of [
      'shop=evil.myshopify.com',
      'timestamp=1317327555',
      'logged_in_customer_id=7',
      'path_prefix=/apps/x',
    ]) {
      // Even correctly signed over the merged value: the app might read only one of them.
      expect(verify(signed(`${LOGGED_IN}&${extra}`))).toEqual({ ok: false, reason: 'repeated' })
    }
    expect(
      verify(`${LOGGED_IN}&signature=${LOGGED_IN_SIGNATURE}&signature=${LOGGED_IN_SIGNATURE}`),
    ).toEqual({ ok: false, reason: 'repeated' })
  })

  it('still accepts repeated application parameters (merged and signed)', () => {
    expect(verify(signed(`${LOGGED_IN}&extra=3`))).toEqual({ ok: true })
  })

  it('refuses the official anonymous vector re-split into a customer id (`=` in a value)', () => {
    // Same signed text: `logged_in_customer_id=` + `path_prefix=/apps/…` read as one entry.
    const resplit = ANONYMOUS.replace(
      'logged_in_customer_id=&path_prefix=%2Fapps%2Fawesome_reviews',
      'logged_in_customer_id=path_prefix%3D%2Fapps%2Fawesome_reviews',
    )
    expect(resplit).not.toBe(ANONYMOUS)
    expect(canonicalQuery(parseQuery(resplit))).toBe(canonicalQuery(parseQuery(ANONYMOUS)))
    expect(verify(`${resplit}&signature=${ANONYMOUS_SIGNATURE}`)).toEqual({
      ok: false,
      reason: 'malformed',
    })
  })

  it('refuses any signed key or value holding `=` or `&`, even correctly signed', () => {
    for (const extra of ['q=a%3Db', 'q=a%26b', 'a%3Db=1', 'a%26b=1']) {
      const query = `${LOGGED_IN}&${extra}`
      const signature = appProxySignature(parseQuery(query), SECRET)
      expect(verify(`${query}&signature=${signature}`)).toEqual({ ok: false, reason: 'malformed' })
    }
  })

  it('refuses a missing signature or timestamp, and malformed ones', () => {
    expect(verify(LOGGED_IN)).toEqual({ ok: false, reason: 'missing' })
    const noTimestamp = LOGGED_IN.replace('&timestamp=1317327555', '')
    expect(verify(signed(noTimestamp))).toEqual({ ok: false, reason: 'missing' })
    expect(verify(`${LOGGED_IN}&signature=${LOGGED_IN_SIGNATURE.toUpperCase()}`)).toEqual({
      ok: false,
      reason: 'malformed',
    })
    expect(verify(`${LOGGED_IN}&signature=${LOGGED_IN_SIGNATURE.slice(2)}`)).toEqual({
      ok: false,
      reason: 'malformed',
    })
    expect(verify(signed(LOGGED_IN.replace('1317327555', '13173275x5')))).toEqual({
      ok: false,
      reason: 'malformed',
    })
  })

  it('refuses a timestamp more than the allowed skew away, either way', () => {
    const query = `${LOGGED_IN}&signature=${LOGGED_IN_SIGNATURE}`
    expect(verify(query, VECTOR_TIME + 90)).toEqual({ ok: true })
    expect(verify(query, VECTOR_TIME - 90)).toEqual({ ok: true })
    expect(verify(query, VECTOR_TIME + 91)).toEqual({ ok: false, reason: 'stale' })
    expect(verify(query, VECTOR_TIME - 91)).toEqual({ ok: false, reason: 'stale' })
    expect(verify(query, VECTOR_TIME + 3600, 3600)).toEqual({ ok: true })
  })
})
