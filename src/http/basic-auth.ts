import { CREDENTIAL_BYTES, digestSecret } from '../crypto/secrets.js'
import { isUuid } from '../lib/ids.js'

/**
 * Base64 that may be several padded pieces end to end: a TrueVault-era Node client sends
 * `base64(key) + "Og=="` (base64 of `:`), which is one piece for a key whose length is a multiple
 * of 3 (every key issued now) but two for the 43-character keys of earlier releases. Each piece
 * is decoded on its own (Node stops at the first padding), so those keys keep working too.
 */
function decodeBase64Pieces(text: string): string {
  // The usual header (padding at the end only) takes one regex test on the hot path.
  if (!/=[^=]/.test(text)) return Buffer.from(text, 'base64').toString('utf8')
  const pieces = text.split(/(?<==)(?=[^=])/)
  return Buffer.concat(pieces.map((p) => Buffer.from(p, 'base64'))).toString('utf8')
}

/**
 * HTTP Basic as every TrueVault client sends it: an API key or access token as the user name with
 * an empty password, or a SAT's `http_auth` pair (a non-empty password means a SAT).
 */
export function parseBasic(header: string | undefined): { user: string; password: string } | null {
  if (!header) return null
  const match = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header)
  if (!match) return null
  const decoded = decodeBase64Pieces(match[1] as string)
  const colon = decoded.indexOf(':')
  if (colon <= 0) return null
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) }
}

/** Longest user name or password of a Basic header that is looked at (longer: no credential). */
export const BASIC_PART_MAX = 512

/**
 * The shapes of the API keys and access tokens Coffer issues: 36 base64url characters
 * (CREDENTIAL_BYTES), or 43 for those of earlier releases (32 bytes).
 */
const ISSUED_CREDENTIAL = new RegExp(
  `^(?:[A-Za-z0-9_-]{${Math.ceil((CREDENTIAL_BYTES * 4) / 3)}}|[A-Za-z0-9_-]{43})$`,
)

/** The user name a SAT's `http_auth` pair has: `sat-<uuid>`. */
const SAT_USERNAME = /^sat-([0-9a-f-]{36})$/i

/**
 * The audit trail's handle of a credential that was presented but not verified (decisions.md
 * 172), read from the header alone, with no lookup: the same value a verified credential's
 * events carry as `credential_ref` — the SAT id of a SAT pair, or the first 12 characters of
 * the stored digest of an API key or access token — so an auditor can tie the two together.
 * Only for a value shaped like an issued credential: the digest of anything else (a password
 * typed into the wrong field) could be guessed back from its prefix, and is not kept.
 */
export function unverifiedCredentialRef(header: string | undefined): string | null {
  const basic = parseBasic(header)
  if (!basic || basic.user.length > BASIC_PART_MAX || basic.password.length > BASIC_PART_MAX)
    return null
  if (basic.password !== '') {
    const id = SAT_USERNAME.exec(basic.user)?.[1]?.toLowerCase()
    return id && isUuid(id) ? id : null
  }
  return ISSUED_CREDENTIAL.test(basic.user) ? digestSecret(basic.user).slice(0, 12) : null
}
