import { createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto'
import { decodeStoredBase64, open, seal } from '../../crypto/aead.js'

/**
 * Everything keyed by the consent secret (COFFER_CONSENT_JWT_SECRET, or the generated file):
 * - the HS256 key of consent tokens (the secret itself);
 * - a digest key (HKDF) for the consumer lookup key: HMAC-SHA256 of (shop, identifier), so an
 *   email is never stored in plaintext and cannot be found by hashing guesses without the key;
 * - a sealing key (HKDF) for the identifier itself, AES-256-GCM bound to its row, so the export
 *   can show whom a record is about.
 * Consent records are not tied to a Coffer account, so the per-account keyring does not apply;
 * deriving from the consent secret also keeps them readable across master-key rotations.
 * Changing the consent secret therefore orphans every record (decisions.md, Consent).
 */
export class ConsentKeys {
  readonly tokenKey: KeyObject
  readonly #digestKey: Buffer
  readonly #sealKey: Buffer

  constructor(secret: string) {
    const material = Buffer.from(secret, 'utf8')
    this.tokenKey = createSecretKey(material)
    this.#digestKey = derive(material, 'coffer consent consumer digest')
    this.#sealKey = derive(material, 'coffer consent consumer seal')
  }

  /** The lookup key of a consumer in a shop (URL-safe base64 of 32 bytes). */
  digest(shop: string, identifier: string): string {
    return createHmac('sha256', this.#digestKey)
      .update(JSON.stringify([shop, identifier]), 'utf8')
      .digest('base64url')
  }

  seal(shop: string, digest: string, identifier: string): string {
    return seal(this.#sealKey, Buffer.from(identifier, 'utf8'), aad(shop, digest)).toString(
      'base64',
    )
  }

  /** The identifier sealed in a row; throws IntegrityError when it was altered or moved. */
  open(shop: string, digest: string, sealed: string): string {
    return open(this.#sealKey, decodeStoredBase64(sealed), aad(shop, digest)).toString('utf8')
  }
}

function derive(material: Buffer, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', material, Buffer.alloc(0), info, 32))
}

function aad(shop: string, digest: string): Buffer {
  return Buffer.from(`coffer consent consumer\n${digest}\n${shop}`, 'utf8')
}
