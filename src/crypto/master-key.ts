import { createHash, createHmac, randomBytes } from 'node:crypto'
import { decodeStoredBase64, KEY_BYTES, open, seal } from './aead.js'

/** Associated data of a wrapped SQLite file key (never a data key's: those carry ids). */
const FILE_KEY_AAD = Buffer.from('coffer sqlite file key\nv1')

/**
 * The key that wraps every data key. It never reaches the database: only its fingerprint is
 * stored beside each wrapped data key, so a node picks the key that unwraps a data key without
 * trial decryption and can tell at start whether its keys unlock the data.
 */
export class MasterKey {
  /**
   * The fingerprint: HMAC-SHA256 keyed by the master key over a fixed label, 16 hex digits. A
   * MAC under the key (not a hash of it) is the standard key-identifier construction: it is
   * domain-separated from every other use of the key and reveals nothing but "this is the key"
   * to someone who already holds a candidate (docs/pending/keyrot.md).
   */
  readonly id: string
  /**
   * The identifier releases before migration 0019 stored in `master_key_id` (a prefixed SHA-256
   * of the key): only matched against old rows, never written again.
   */
  readonly legacyId: string
  readonly #key: Buffer

  private constructor(key: Buffer) {
    this.#key = key
    this.id = createHmac('sha256', key)
      .update('coffer master key fingerprint')
      .digest('hex')
      .slice(0, 16)
    this.legacyId = createHash('sha256')
      .update('coffer master key id\n')
      .update(key)
      .digest('hex')
      .slice(0, 16)
  }

  /** Alias of `id`, the name the data_keys column uses. */
  get fingerprint(): string {
    return this.id
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

  /**
   * Wraps the key of the encrypted SQLite file (store/sqlite-file-key.ts). Its own associated
   * data, so a wrapped data key can never be passed off as the file key or the other way round.
   */
  wrapFileKey(fileKey: Buffer): string {
    return seal(this.#key, fileKey, FILE_KEY_AAD).toString('base64')
  }

  unwrapFileKey(wrapped: string): Buffer {
    return open(this.#key, decodeStoredBase64(wrapped), FILE_KEY_AAD)
  }
}
