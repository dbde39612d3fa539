import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  decodeStoredBase64,
  IntegrityError,
  KEY_BYTES,
  NONCE_BYTES,
  open,
  seal,
  TAG_BYTES,
} from './aead.js'

/**
 * The field cipher (AES-256-GCM, random 96-bit nonces), tested as HashiCorp Vault tests its
 * barrier (developer.hashicorp.com/vault/docs/internals/security): confidential, tamper-evident,
 * bound to its associated data, never the same ciphertext twice, and refusing keys of the wrong
 * size.
 */
const key = randomBytes(KEY_BYTES)
const aad = Buffer.from('document\nvault-1\ndoc-1')

describe('seal / open', () => {
  it('round-trips plaintexts of every size, including empty', () => {
    for (const size of [0, 1, 15, 16, 17, 1000, 65_536, 1_000_003]) {
      const plain = randomBytes(size)
      const sealed = seal(key, plain, aad)
      expect(sealed.length).toBe(NONCE_BYTES + size + TAG_BYTES)
      expect(open(key, sealed, aad).equals(plain)).toBe(true)
    }
  })

  it('does not contain the plaintext (Vault: Confidential)', () => {
    const plain = Buffer.from('canary-7f3a9c1e-canary-7f3a9c1e-canary')
    const sealed = seal(key, plain, aad)
    expect(sealed.includes(plain)).toBe(false)
    expect(sealed.includes(plain.subarray(0, 8))).toBe(false)
  })

  it('fails closed when any single byte is flipped: nonce, body or tag (Vault: Integrity)', () => {
    const plain = Buffer.from('{"ssn":"078-05-1120","name":"Hilda"}')
    const sealed = seal(key, plain, aad)
    let checked = 0
    for (let i = 0; i < sealed.length; i++) {
      for (const mask of [0x01, 0x80, 0xff]) {
        const tampered = Buffer.from(sealed)
        tampered[i] = (tampered[i] as number) ^ mask
        expect(() => open(key, tampered, aad), `byte ${i} ^ ${mask}`).toThrow(IntegrityError)
        checked++
      }
    }
    // every region was hit: 12 nonce bytes, the body, 16 tag bytes
    expect(checked).toBe(3 * (NONCE_BYTES + plain.length + TAG_BYTES))
  })

  it('fails closed when truncated, extended or empty', () => {
    const sealed = seal(key, Buffer.from('hello'), aad)
    for (let n = 0; n < sealed.length; n++) {
      expect(() => open(key, sealed.subarray(0, n), aad)).toThrow(IntegrityError)
    }
    expect(() => open(key, Buffer.concat([sealed, Buffer.from([0])]), aad)).toThrow(IntegrityError)
    expect(() => open(key, sealed.subarray(1), aad)).toThrow(IntegrityError)
    expect(() => open(key, Buffer.alloc(0), aad)).toThrow(IntegrityError)
    // the shortest valid ciphertext: an empty plaintext
    expect(open(key, seal(key, Buffer.alloc(0), aad), aad).length).toBe(0)
  })

  it('fails closed under other associated data (Vault: MoveIntegrity)', () => {
    const sealed = seal(key, Buffer.from('secret'), aad)
    for (const other of [
      Buffer.from('document\nvault-1\ndoc-2'),
      Buffer.from('document\nvault-2\ndoc-1'),
      Buffer.from('document\nvault-1\ndoc-1\n'),
      Buffer.from('Document\nvault-1\ndoc-1'),
      Buffer.alloc(0),
    ]) {
      expect(() => open(key, sealed, other)).toThrow(IntegrityError)
    }
  })

  it('fails closed under another key', () => {
    const sealed = seal(key, Buffer.from('secret'), aad)
    expect(() => open(randomBytes(KEY_BYTES), sealed, aad)).toThrow(IntegrityError)
  })

  it('never repeats a nonce or a ciphertext: 10,000 seals of one plaintext (Vault: Encrypt_Unique)', () => {
    const plain = Buffer.from('the same plaintext every time')
    const nonces = new Set<string>()
    const ciphertexts = new Set<string>()
    for (let i = 0; i < 10_000; i++) {
      const sealed = seal(key, plain, aad)
      nonces.add(sealed.subarray(0, NONCE_BYTES).toString('hex'))
      ciphertexts.add(sealed.toString('hex'))
    }
    expect(nonces.size).toBe(10_000)
    expect(ciphertexts.size).toBe(10_000)
  })

  it('refuses keys of the wrong size (Vault: KeyLength)', () => {
    for (const size of [0, 16, 24, 31, 33, 64]) {
      expect(() => seal(randomBytes(size), Buffer.from('x'), aad)).toThrow()
      // opening with a wrong-size key is an integrity failure, never plaintext
      expect(() => open(randomBytes(size), seal(key, Buffer.from('x'), aad), aad)).toThrow(
        IntegrityError,
      )
    }
  })

  it('IntegrityError says nothing about the data', () => {
    const error = new IntegrityError()
    expect(error.name).toBe('IntegrityError')
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toBe('stored data failed its integrity check')
  })
})

describe('decodeStoredBase64', () => {
  it('decodes the canonical encoding of any length', () => {
    for (let n = 0; n < 40; n++) {
      const bytes = randomBytes(n)
      expect(decodeStoredBase64(bytes.toString('base64')).equals(bytes)).toBe(true)
    }
  })

  it('refuses every other spelling: changed padding bits, stray characters, missing padding', () => {
    // 'QQ==' is 'A'; 'QR==' decodes to 'A' too in Node (padding bits ignored)
    expect(Buffer.from('QR==', 'base64').toString()).toBe('A')
    for (const text of [
      'QR==',
      'QQ',
      'QQ=',
      'QQ===',
      ' QQ==',
      'QQ==\n',
      'Q!Q==',
      'QQ<=',
      'QQ-_',
      'QQ==QQ==',
    ]) {
      expect(() => decodeStoredBase64(text), JSON.stringify(text)).toThrow(IntegrityError)
    }
  })
})
