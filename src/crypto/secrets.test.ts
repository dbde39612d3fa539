import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  CREDENTIAL_BYTES,
  digestSecret,
  randomCredential,
  randomSecret,
  safeEqual,
} from './secrets.js'

describe('randomSecret', () => {
  it('is 43 URL-safe characters carrying 256 bits', () => {
    const secret = randomSecret()
    expect(secret).toHaveLength(43)
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32)
    // Round-trips exactly: no padding, no lost bits.
    expect(Buffer.from(secret, 'base64url').toString('base64url')).toBe(secret)
  })

  it('never contains `:` (fits an HTTP Basic user name), `+`, `/` or `=`', () => {
    for (let i = 0; i < 1000; i++) expect(randomSecret()).not.toMatch(/[:+/=]/)
  })

  it('makes 1,000 distinct secrets', () => {
    const secrets = new Set(Array.from({ length: 1000 }, () => randomSecret()))
    expect(secrets.size).toBe(1000)
  })

  it('uses every URL-safe character (looks random)', () => {
    const seen = new Set(Array.from({ length: 1000 }, () => randomSecret()).join(''))
    expect(seen.size).toBe(64)
  })

  it('honours a custom byte count', () => {
    expect(Buffer.from(randomSecret(16), 'base64url')).toHaveLength(16)
    expect(randomSecret(16)).toHaveLength(22)
    expect(randomSecret(48)).toHaveLength(64)
  })
})

describe('randomCredential', () => {
  it('is 36 URL-safe characters (TrueVault’s length) carrying 216 random bits', () => {
    const credential = randomCredential()
    expect(credential).toMatch(/^[A-Za-z0-9_-]{36}$/)
    expect(CREDENTIAL_BYTES * 8).toBeGreaterThanOrEqual(128)
    expect(Buffer.from(credential, 'base64url')).toHaveLength(CREDENTIAL_BYTES)
    expect(Buffer.from(credential, 'base64url').toString('base64url')).toBe(credential)
  })

  it('makes `base64(key) + "Og=="` decode to `key:` (a length that is a multiple of 3)', () => {
    for (let i = 0; i < 100; i++) {
      const key = randomCredential()
      const header = `${Buffer.from(key).toString('base64')}Og==`
      expect(Buffer.from(header, 'base64').toString('utf8')).toBe(`${key}:`)
    }
  })

  it('makes 1,000 distinct credentials', () => {
    expect(new Set(Array.from({ length: 1000 }, () => randomCredential())).size).toBe(1000)
  })
})

describe('digestSecret', () => {
  it('is a SHA-256 digest in URL-safe base64 (43 characters)', () => {
    expect(digestSecret('abc')).toBe('ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0')
    expect(digestSecret(randomSecret())).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })

  it('is deterministic', () => {
    const secret = randomSecret()
    expect(digestSecret(secret)).toBe(digestSecret(secret))
    expect(digestSecret('')).toBe(digestSecret(''))
  })

  it('differs for different inputs, including a one-character change or case change', () => {
    const secret = randomSecret()
    const flipped = `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`
    expect(digestSecret(secret)).not.toBe(digestSecret(flipped))
    expect(digestSecret('Secret')).not.toBe(digestSecret('secret'))
    expect(digestSecret('a')).not.toBe(digestSecret('a '))
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        fc.pre(a !== b)
        expect(digestSecret(a)).not.toBe(digestSecret(b))
      }),
    )
  })

  it('hashes text as UTF-8', () => {
    expect(digestSecret('é')).not.toBe(digestSecret('e\u0301'))
    expect(digestSecret('😀')).toBe(digestSecret('\ud83d\ude00'))
  })

  it('never equals or contains the secret (nor its base64)', () => {
    for (let i = 0; i < 200; i++) {
      const secret = randomSecret()
      const digest = digestSecret(secret)
      expect(digest).not.toBe(secret)
      expect(digest).not.toContain(secret)
      expect(digest).not.toContain(secret.slice(0, 12))
      expect(digest).not.toContain(Buffer.from(secret).toString('base64').slice(0, 12))
    }
    fc.assert(
      fc.property(fc.string({ minLength: 12, maxLength: 200 }), (secret) => {
        const digest = digestSecret(secret)
        expect(digest).not.toBe(secret)
        expect(digest).not.toContain(secret)
      }),
    )
  })
})

describe('safeEqual', () => {
  it('is true for equal strings', () => {
    const secret = randomSecret()
    expect(safeEqual(secret, `${secret}`)).toBe(true)
    expect(safeEqual('', '')).toBe(true)
    expect(safeEqual('é😀', 'é😀')).toBe(true)
  })

  it('is false for different strings of the same length', () => {
    expect(safeEqual('abcd', 'abce')).toBe(false)
    expect(safeEqual('Abcd', 'abcd')).toBe(false)
  })

  it('is false for different lengths', () => {
    expect(safeEqual('abc', 'abcd')).toBe(false)
    expect(safeEqual('', 'a')).toBe(false)
    expect(safeEqual('a'.repeat(1000), 'a')).toBe(false)
  })

  it('is false when one is a prefix of the other or they share a long prefix', () => {
    const secret = randomSecret()
    expect(safeEqual(secret, secret.slice(0, 42))).toBe(false)
    expect(safeEqual(secret.slice(0, 42), secret)).toBe(false)
    expect(safeEqual(`${secret}x`, `${secret}y`)).toBe(false)
    expect(safeEqual(`${secret}`, `${secret}\u0000`)).toBe(false)
  })

  it('is false for text that differs only in Unicode normalization', () => {
    expect(safeEqual('é', 'e\u0301')).toBe(false)
  })

  it('agrees with === for any pair of strings', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        expect(safeEqual(a, b)).toBe(a === b)
        expect(safeEqual(a, a)).toBe(true)
      }),
    )
  })
})
