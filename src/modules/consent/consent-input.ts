import { consentErrors } from './consent-errors.js'
import { PREFERENCE_FIELDS, type Preferences } from './retention.js'
import type { QueryPairs } from './signature.js'

/**
 * The consent interface's request rules (spec, Consent endpoints and Consent interface errors),
 * pure: raw query pairs or a parsed body in, a typed request or the spec's error out. Checks
 * run in the order of the spec's error table.
 */

export type Provider = 'storefront' | 'email'

export interface ConsentQuery {
  provider: Provider
  shop: string
  privacyCenterId: string
  /** Storefront: the App Proxy's customer id; empty or absent when nobody is logged in. */
  customerId: string | undefined
  /** Email provider: trimmed and lowercased. */
  email: string | undefined
  /** Lowercased; absent when not sent or sent empty. */
  clientId: string | undefined
}

export interface ConsentUpdate {
  jwt: string
  changes: Partial<Preferences>
}

export const MAX_TEXT = 100
const MAX_EMAIL = 254

/** Parameters that are read, plus the App Proxy's own: each may arrive at most once. */
const SINGLE = [
  'provider',
  'shop',
  'privacy_center_id',
  'logged_in_customer_id',
  'customer_email',
  'client_id',
  'signature',
  'timestamp',
  'path_prefix',
] as const

/** Version 4 in the version nibble. The variant is not checked: Polaris clients were seen
 * sending `…-4fd3-cd46-…` (seen in real Polaris consent cookies), and the id is only recorded. */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A pragmatic address check: one `@`, a dotted domain with a 2+ letter TLD, no spaces. */
const EMAIL =
  /^[^\s@"(),:;<>[\\\]\p{Cc}]{1,64}@(?:[\p{L}\p{N}](?:[\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?\.)+\p{L}{2,63}$/u

/** A Shopify customer id: a positive 64-bit integer in decimal, no sign, no leading zero. */
const CUSTOMER_ID = /^[1-9][0-9]{0,19}$/

export function isUuidV4(value: string): boolean {
  return UUID_V4.test(value)
}

export function isEmail(value: string): boolean {
  return value.length <= MAX_EMAIL && EMAIL.test(value)
}

function single(pairs: QueryPairs): Map<string, string> {
  const values = new Map<string, string>()
  for (const [key, value] of pairs) {
    if ((SINGLE as readonly string[]).includes(key) && values.has(key)) {
      throw consentErrors.repeated(key)
    }
    values.set(key, value)
  }
  return values
}

/** Characters as people count them (code points), not UTF-16 units: an emoji is one. */
const chars = (text: string) => [...text].length

export function parseConsentQuery(pairs: QueryPairs): ConsentQuery {
  const q = single(pairs)
  const provider = q.get('provider') ?? ''
  if (provider === '') throw consentErrors.providerRequired()
  if (chars(provider) > MAX_TEXT) throw consentErrors.tooLong('provider', MAX_TEXT)
  if (provider !== 'storefront' && provider !== 'email') throw consentErrors.providerInvalid()

  const shop = q.get('shop') ?? ''
  if (shop === '') {
    throw provider === 'storefront'
      ? consentErrors.shopRequiredStorefront()
      : consentErrors.shopRequiredEmail()
  }
  if (chars(shop) > MAX_TEXT) throw consentErrors.tooLong('shop', MAX_TEXT)

  const privacyCenterId = q.get('privacy_center_id') ?? ''
  if (privacyCenterId === '') throw consentErrors.privacyCenterRequired()
  if (chars(privacyCenterId) > MAX_TEXT) throw consentErrors.tooLong('privacy_center_id', MAX_TEXT)

  let email: string | undefined
  if (provider === 'email') {
    const raw = (q.get('customer_email') ?? '').trim()
    if (raw === '') throw consentErrors.emailRequired()
    if (!isEmail(raw)) throw consentErrors.emailInvalid()
    // One consumer whatever the case they type (providers treat addresses case-insensitively).
    email = raw.toLowerCase()
  }

  const clientId = q.get('client_id') || undefined
  if (clientId !== undefined && !isUuidV4(clientId)) throw consentErrors.clientIdInvalid()

  let customerId: string | undefined
  if (provider === 'storefront') {
    customerId = q.get('logged_in_customer_id')
    if (customerId !== undefined && chars(customerId) > MAX_TEXT) {
      throw consentErrors.tooLong('logged_in_customer_id', MAX_TEXT)
    }
    // Shopify's customer ids are numbers. Anything else cannot come from the App Proxy, and a
    // value holding `=` could be another signed parameter moved into it (signature.ts).
    if (customerId !== undefined && customerId !== '' && !CUSTOMER_ID.test(customerId)) {
      throw consentErrors.customerIdInvalid()
    }
  }
  return {
    provider,
    shop,
    privacyCenterId,
    customerId,
    email,
    clientId: clientId?.toLowerCase(),
  }
}

/** `body` is the parsed JSON; undefined when the body was empty or not JSON. */
export function parseConsentUpdate(body: unknown): ConsentUpdate {
  if (body === undefined) throw consentErrors.invalidJson()
  const record =
    typeof body === 'object' && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : {}
  const jwt = record.jwt
  if (typeof jwt !== 'string' || jwt.trim() === '') throw consentErrors.jwtRequired()
  const changes: Partial<Preferences> = {}
  let given = 0
  for (const field of PREFERENCE_FIELDS) {
    if (!Object.hasOwn(record, field)) continue
    given++
    const value = record[field]
    if (value !== true && value !== false && value !== null) throw consentErrors.notBoolean(field)
    changes[field] = value
  }
  if (given === 0) throw consentErrors.noFields()
  return { jwt, changes }
}
