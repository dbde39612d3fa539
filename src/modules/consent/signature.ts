import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * The storefront App Proxy signature, pure (Shopify's algorithm, "Authenticate app proxies":
 * https://shopify.dev/docs/apps/build/online-store/app-proxies/authenticate-app-proxies):
 * 1. the raw query string is split into decoded (key, value) pairs (`+` is a space);
 * 2. `signature` is removed;
 * 3. repeated keys are merged into one `key=v1,v2` entry, values in arrival order;
 * 4. one `key=value` string per key, with the decoded values;
 * 5. sorted by byte order of their UTF-8 (Ruby's sort: not `localeCompare`, which orders
 *    `consented` before `consentGiven`);
 * 6. concatenated with no separator;
 * 7. HMAC-SHA256 with the app's shared secret, lowercase hex, compared in constant time.
 * Every parameter that arrives is signed, not a fixed list (Shopify may add new ones), and an
 * empty value (`logged_in_customer_id=` when nobody is logged in) is kept.
 */

export type QueryPairs = readonly (readonly [string, string])[]

/** Decoded pairs of a raw query string (without the `?`), in arrival order. */
export function parseQuery(raw: string): [string, string][] {
  return [...new URLSearchParams(raw)]
}

/** Steps 2 to 6: the text that is signed. */
export function canonicalQuery(pairs: QueryPairs): string {
  const merged = new Map<string, string[]>()
  for (const [key, value] of pairs) {
    if (key === 'signature') continue
    const values = merged.get(key)
    if (values) values.push(value)
    else merged.set(key, [value])
  }
  const entries = [...merged].map(([key, values]) => Buffer.from(`${key}=${values.join(',')}`))
  entries.sort(Buffer.compare)
  return Buffer.concat(entries).toString('utf8')
}

/** The signature the App Proxy would send for these parameters (lowercase hex). */
export function appProxySignature(pairs: QueryPairs, secret: string): string {
  return createHmac('sha256', secret).update(canonicalQuery(pairs), 'utf8').digest('hex')
}

/**
 * Parameters that must arrive at most once: a repeated `shop` or customer id could be read as
 * one value by the app while the signature covers the merged `a,b` (shopify-app-js PR #3328).
 */
export const SINGLE_PARAMETERS = [
  'shop',
  'timestamp',
  'signature',
  'logged_in_customer_id',
  'path_prefix',
] as const

export type SignatureFailure = 'missing' | 'repeated' | 'malformed' | 'stale' | 'mismatch'
export type SignatureCheck = { ok: true } | { ok: false; reason: SignatureFailure }

export interface VerifyOptions {
  secret: string
  /** The current time in Unix seconds (from the injected clock). */
  nowSeconds: number
  /** How far `timestamp` may be from now, either way: the signed URL hands out a token. */
  maxSkewSeconds: number
}

/**
 * Characters that must not appear in a signed key or value. The signed text joins `k=v`
 * entries with no separator, so `logged_in_customer_id=&n=X` and `logged_in_customer_id=n%3DX`
 * sign the very same bytes: with `=` allowed inside a value, a signed anonymous request could be
 * re-sent as one for customer `n=X`. `&` is the query's own separator and never appears decoded
 * in what the App Proxy sends either.
 */
const RESPLIT = /[=&]/

/**
 * Verifies a proxied request's query: single security parameters, no key or value that could
 * re-split the signed text, a fresh timestamp, the HMAC.
 */
export function verifyAppProxy(pairs: QueryPairs, options: VerifyOptions): SignatureCheck {
  for (const name of SINGLE_PARAMETERS) {
    if (pairs.filter(([key]) => key === name).length > 1) return { ok: false, reason: 'repeated' }
  }
  if (
    pairs.some(([key, value]) => key !== 'signature' && (RESPLIT.test(key) || RESPLIT.test(value)))
  ) {
    return { ok: false, reason: 'malformed' }
  }
  const given = pairs.find(([key]) => key === 'signature')?.[1]
  const timestamp = pairs.find(([key]) => key === 'timestamp')?.[1]
  if (given === undefined || timestamp === undefined) return { ok: false, reason: 'missing' }
  if (!/^[0-9a-f]{64}$/.test(given) || !/^\d{1,12}$/.test(timestamp)) {
    return { ok: false, reason: 'malformed' }
  }
  if (Math.abs(options.nowSeconds - Number(timestamp)) > options.maxSkewSeconds) {
    return { ok: false, reason: 'stale' }
  }
  const expected = Buffer.from(appProxySignature(pairs, options.secret), 'hex')
  const actual = Buffer.from(given, 'hex')
  return timingSafeEqual(expected, actual) ? { ok: true } : { ok: false, reason: 'mismatch' }
}
