/**
 * Strips values read from a user's data out of a provider's error before it is shown to the
 * caller as `provider_error`: a provider refusing a recipient quotes it ("The 'To' number
 * +15558675309 is not a valid phone number"), and the caller may have no right to read it.
 * The provider's codes, statuses and the rest of its words are kept.
 */

export const REDACTED = '[redacted]'
/** Shorter values (a one-letter name, an age) would blank out ordinary words of the error. */
const MIN_REDACTED_LENGTH = 4
/** Deeper structures are not walked further (a provider's error is small and flat). */
const MAX_DEPTH = 16
// Formatting a provider may put between the digits of a number it quotes.
const PHONE_FORMATTING = '[\\s\\-.()]*'

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** The spellings of one value a provider may quote: as sent, URL-encoded, and for a phone number its digits however formatted. */
function spellings(value: string): string[] {
  const out = [escapeRegExp(value)]
  const encoded = encodeURIComponent(value)
  if (encoded !== value) out.push(escapeRegExp(encoded))
  const digits = value.replace(/\D/g, '')
  if (/^\+?[\d\s\-.()]+$/.test(value) && digits.length >= 7) {
    out.push(`\\+?${digits.split('').join(PHONE_FORMATTING)}`)
  }
  return out
}

/** One case-insensitive pattern for every value, longest first (null when there is nothing to strip). */
function patternFor(values: readonly string[]): RegExp | null {
  const unique = [...new Set(values.map((v) => v.trim()))].filter(
    (v) => v.length >= MIN_REDACTED_LENGTH,
  )
  if (unique.length === 0) return null
  const alternatives = unique.flatMap(spellings).sort((a, b) => b.length - a.length)
  return new RegExp(alternatives.join('|'), 'gi')
}

function strip(node: unknown, pattern: RegExp, depth: number): unknown {
  if (typeof node === 'string') return node.replace(pattern, REDACTED)
  if (typeof node === 'number') {
    const text = String(node)
    return text.replace(pattern, REDACTED) === text ? node : REDACTED
  }
  if (typeof node !== 'object' || node === null) return node
  if (depth >= MAX_DEPTH) return REDACTED
  if (Array.isArray(node)) return node.map((item) => strip(item, pattern, depth + 1))
  // fromEntries defines own properties: a `__proto__` key stays a key, never a prototype.
  return Object.fromEntries(
    Object.entries(node).map(([key, value]) => [
      key.replace(pattern, REDACTED),
      strip(value, pattern, depth + 1),
    ]),
  )
}

/** `detail` with every spelling of `values` replaced by `[redacted]`, in keys and values alike. */
export function redactValues(
  detail: Record<string, unknown>,
  values: readonly string[],
): Record<string, unknown> {
  const pattern = patternFor(values)
  return pattern ? (strip(detail, pattern, 0) as Record<string, unknown>) : detail
}
