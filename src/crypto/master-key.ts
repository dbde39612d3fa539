import { createHash, randomBytes } from 'node:crypto'
import { decodeStoredBase64, KEY_BYTES, open, seal } from './aead.js'

/**
 * The key that wraps every data key. It never reaches the database: only its id (a fingerprint)
 * is stored beside each wrapped data key, so the server can tell at start whether the configured
 * key is the one that unlocks the data.
 */
export class MasterKey {
  readonly id: string
  readonly #key: Buffer

  private constructor(key: Buffer) {
    this.#key = key
    this.id = createHash('sha256')
      .update('coffer master key id\n')
      .update(key)
      .digest('hex')
      .slice(0, 16)
  }

  /** Parses base64 of exactly 32 bytes; throws a message fit for a configuration error. */
  static fromBase64(text: string): MasterKey {
    const trimmed = text.trim()
    // 32 bytes are 43 base64 characters plus one '=' of padding.
    if (!/^[A-Za-z0-9+/]{43}=?$/.test(trimmed)) {
      throw new Error('a master key must be the base64 of exactly 32 bytes')
    }
    return new MasterKey(Buffer.from(trimmed, 'base64'))
  }

  static generate(): MasterKey {
    return new MasterKey(randomBytes(KEY_BYTES))
  }

  toBase64(): string {
    return this.#key.toString('base64')
  }

  /** Wraps a data key; `context` (account and key id) is bound as associated data. */
  wrap(dataKey: Buffer, context: string): string {
    return seal(this.#key, dataKey, Buffer.from(`coffer data key\n${context}`)).toString('base64')
  }

  unwrap(wrapped: string, context: string): Buffer {
    return open(this.#key, decodeStoredBase64(wrapped), Buffer.from(`coffer data key\n${context}`))
  }
}
