import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'

/** AES-256-GCM with 96-bit random nonces and 128-bit tags. */
export const KEY_BYTES = 32
export const NONCE_BYTES = 12
export const TAG_BYTES = 16

/** Stored data failed authentication: tampered, moved to another row, or the wrong key. */
export class IntegrityError extends Error {
  constructor(message = 'stored data failed its integrity check') {
    super(message)
    this.name = 'IntegrityError'
  }
}

/** Encrypts `plaintext` bound to `aad`; the result is nonce ‖ ciphertext ‖ tag. */
export function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, nonce)
  cipher.setAAD(aad)
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return Buffer.concat([nonce, body, cipher.getAuthTag()])
}

/** Decrypts what `seal` made with the same key and `aad`, or throws IntegrityError. */
export function open(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < NONCE_BYTES + TAG_BYTES) throw new IntegrityError()
  const nonce = sealed.subarray(0, NONCE_BYTES)
  const tag = sealed.subarray(sealed.length - TAG_BYTES)
  const body = sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, nonce)
    decipher.setAAD(aad)
    decipher.setAuthTag(tag)
    const plaintext = decipher.update(body)
    // GCM's final() only checks the tag and returns no bytes: no copy into a new buffer then.
    const rest = decipher.final()
    return rest.length === 0 ? plaintext : Buffer.concat([plaintext, rest])
  } catch {
    throw new IntegrityError()
  }
}

/**
 * Decodes stored base64, accepting only the canonical encoding (what `toString('base64')` makes).
 * Node's decoder skips characters outside the alphabet and ignores padding bits, so without this
 * a changed stored text (a flipped `=`, an inserted byte) could still decrypt: every change of a
 * stored ciphertext must fail closed.
 */
export function decodeStoredBase64(text: string): Buffer {
  const bytes = Buffer.from(text, 'base64')
  if (bytes.toString('base64') !== text) throw new IntegrityError()
  return bytes
}
