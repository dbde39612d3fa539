import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

/** 256 random bits as URL-safe base64 (43 characters, no `:` so it fits HTTP Basic user names). */
export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url')
}

/**
 * Random bytes in an API key or access token: 27, i.e. 216 random bits in 36 base64url
 * characters. 36 is the length of TrueVault's UUID credentials, which clients were written
 * against: one builds its header as `"Basic " + base64(key) + "Og=="` (base64 of `:`), which
 * works only when the key's length is a multiple of 3 (base64 without padding). A UUIDv4 has the
 * same length but only 122 random bits, under the 128 we require; 27 bytes keep a wide margin.
 */
export const CREDENTIAL_BYTES = 27

/** A new API key or access token: 36 characters of URL-safe base64, 216 random bits. */
export function randomCredential(): string {
  return randomSecret(CREDENTIAL_BYTES)
}

/**
 * Digest used to store and look up high-entropy secrets (API keys, access tokens, SAT secrets).
 * A plain SHA-256 is enough for ≥128-bit random secrets (ASVS 5.0 6.5.2); passwords use argon2id.
 */
export function digestSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('base64url')
}

/** Constant-time comparison of two strings of any length. */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a, 'utf8').digest()
  const hb = createHash('sha256').update(b, 'utf8').digest()
  return timingSafeEqual(ha, hb) && a.length === b.length
}
