import { BlockList, isIP } from 'node:net'
import { errors } from '../../lib/errors.js'

/**
 * Checks of resolved values before they go to a provider. Pure: Coffer never resolves DNS or
 * fetches anything here; each check names the request field and never echoes the value (it may
 * be a user's attribute).
 */

const MAX_EMAIL = 254
const MAX_LOCAL_PART = 64
// The HTML standard's "valid e-mail address" (ASCII), with at least one dot in the domain.
const EMAIL =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+$/

/** A resolved email address (surrounding whitespace dropped), or a 400 naming `field`. */
export function checkEmail(value: string, field: string): string {
  const email = value.trim()
  if (email === '') throw errors.invalidField(field, 'resolved to an empty value')
  const at = email.lastIndexOf('@')
  if (email.length > MAX_EMAIL || at > MAX_LOCAL_PART || !EMAIL.test(email)) {
    throw errors.invalidField(field, 'does not resolve to a valid email address')
  }
  return email
}

// Formatting people type into phone numbers: dropped before the E.164 check.
const PHONE_FORMATTING = /[\s\-.()]/g
const E164 = /^\+[1-9]\d{6,14}$/
const SHORT_CODE = /^\d{3,8}$/
// Twilio's alphanumeric sender ids: up to 11 letters, digits and spaces, at least one letter.
const ALPHANUMERIC_SENDER = /^(?=.*[A-Za-z])[A-Za-z0-9 ]{1,11}$/

function resolvedText(value: string, field: string): string {
  const text = value.trim()
  if (text === '') throw errors.invalidField(field, 'resolved to an empty value')
  return text
}

/** A recipient: an E.164 number (`+` and 7 to 15 digits) once spaces, dashes, dots and brackets are gone. */
export function checkRecipientNumber(value: string, field: string): string {
  const number = resolvedText(value, field).replace(PHONE_FORMATTING, '')
  if (!E164.test(number)) {
    throw errors.invalidField(
      field,
      'does not resolve to an E.164 phone number (+ and 7 to 15 digits)',
    )
  }
  return number
}

/** A sender: an E.164 number as above, a short code, or an alphanumeric sender id (sent as is). */
export function checkSenderNumber(value: string, field: string): string {
  const text = resolvedText(value, field)
  if (SHORT_CODE.test(text) || ALPHANUMERIC_SENDER.test(text)) return text
  const number = text.replace(PHONE_FORMATTING, '')
  if (E164.test(number)) return number
  throw errors.invalidField(
    field,
    'does not resolve to an E.164 phone number, a short code or an alphanumeric sender id',
  )
}

/** Address ranges that are not on the public internet (IANA special-purpose registries). */
const NON_PUBLIC = new BlockList()
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata services live here)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, 'ipv4')
}
for (const [net, prefix] of [
  ['2001::', 32], // Teredo (tunnels to any IPv4 address)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds any IPv4 address)
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, 'ipv6')
}
const GLOBAL_UNICAST_V6 = new BlockList()
GLOBAL_UNICAST_V6.addSubnet('2000::', 3, 'ipv6')

/** Loopback, link-local (`fe80::/10`), unique-local (`fc00::/7`) and the rest are not public. */
function isPublicIp(address: string, version: 4 | 6): boolean {
  if (version === 4) return !NON_PUBLIC.check(address, 'ipv4')
  // An IPv4-mapped address (`::ffff:a.b.c.d`) is checked by the IPv4 rules it carries.
  if (/^::ffff:/i.test(address)) return !NON_PUBLIC.check(address, 'ipv6')
  return GLOBAL_UNICAST_V6.check(address, 'ipv6') && !NON_PUBLIC.check(address, 'ipv6')
}

const LOCAL_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa']
const MAX_URL = 2048

/**
 * A media URL Twilio will fetch: absolute http(s), no credentials, and a host that is public as
 * far as its text shows: not `localhost` or a local-only suffix, not a one-label name, not an IP
 * literal outside public ranges. Coffer does not resolve DNS (Twilio fetches the URL, Coffer
 * never does), so a public name that points at a private address is Twilio's to refuse.
 * Returns the URL as parsed (WHATWG serialization), so what was checked is what is sent.
 */
export function checkMediaUrl(value: string, field: string): string {
  const text = resolvedText(value, field)
  let url: URL
  try {
    if (text.length > MAX_URL) throw new Error('too long')
    url = new URL(text)
  } catch {
    throw errors.invalidField(
      field,
      `does not resolve to an absolute http(s) URL of at most ${MAX_URL} characters`,
    )
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw errors.invalidField(field, 'must resolve to an http or https URL')
  if (url.username || url.password) throw errors.invalidField(field, 'must not carry credentials')
  // The parser has already turned every IPv4 spelling (0x7f.1, 2130706433) into dotted form.
  const host = url.hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase()
  const version = isIP(host)
  if (version === 4 || version === 6) {
    if (!isPublicIp(host, version)) throw errors.invalidField(field, 'must point to a public host')
    return url.href
  }
  if (
    host === 'localhost' ||
    !host.includes('.') ||
    LOCAL_SUFFIXES.some((suffix) => host.endsWith(suffix))
  ) {
    throw errors.invalidField(field, 'must point to a public host')
  }
  return url.href
}
