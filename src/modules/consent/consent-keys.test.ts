import { describe, expect, it } from 'vitest'
import { IntegrityError } from '../../crypto/aead.js'
import { ConsentKeys } from './consent-keys.js'

const keys = new ConsentKeys('a consent secret of at least 32 characters')

describe('consumer digests', () => {
  it('are stable, 32 bytes, and never contain the identifier', () => {
    const d = keys.digest('shop.example', 'ada@example.com')
    expect(d).toBe(keys.digest('shop.example', 'ada@example.com'))
    expect(Buffer.from(d, 'base64url')).toHaveLength(32)
    expect(d).not.toContain('ada')
  })

  it('differ per shop, per consumer and per secret', () => {
    const d = keys.digest('shop.example', 'ada@example.com')
    expect(keys.digest('other.example', 'ada@example.com')).not.toBe(d)
    expect(keys.digest('shop.example', 'bob@example.com')).not.toBe(d)
    expect(
      new ConsentKeys('another secret of at least 32 characters!').digest(
        'shop.example',
        'ada@example.com',
      ),
    ).not.toBe(d)
  })

  it('cannot be confused by moving text between shop and identifier', () => {
    expect(keys.digest('a\nb', 'c')).not.toBe(keys.digest('a', 'b\nc'))
    expect(keys.digest('ab', 'c')).not.toBe(keys.digest('a', 'bc'))
  })
})

describe('sealed identifiers', () => {
  it('round-trip, differ each time, and hold no plaintext', () => {
    const d = keys.digest('s', 'ada@example.com')
    const a = keys.seal('s', d, 'ada@example.com')
    const b = keys.seal('s', d, 'ada@example.com')
    expect(a).not.toBe(b)
    expect(Buffer.from(a, 'base64').toString('latin1')).not.toContain('ada')
    expect(keys.open('s', d, a)).toBe('ada@example.com')
  })

  it('fail closed when moved to another row, altered, or opened with another secret', () => {
    const d = keys.digest('s', 'ada@example.com')
    const sealed = keys.seal('s', d, 'ada@example.com')
    expect(() => keys.open('t', d, sealed)).toThrow(IntegrityError)
    expect(() => keys.open('s', keys.digest('s', 'bob@example.com'), sealed)).toThrow(
      IntegrityError,
    )
    const bytes = Buffer.from(sealed, 'base64')
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 1
    expect(() => keys.open('s', d, bytes.toString('base64'))).toThrow(IntegrityError)
    expect(() =>
      new ConsentKeys('another secret of at least 32 characters!').open('s', d, sealed),
    ).toThrow(IntegrityError)
  })
})
