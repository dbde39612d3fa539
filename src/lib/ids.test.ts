import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { isUuid, newId } from './ids.js'

const CANONICAL = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The 48-bit millisecond timestamp at the front of a UUIDv7. */
const timestampOf = (id: string) => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16)

describe('newId', () => {
  it('is a canonical lower-case UUID', () => {
    const id = newId()
    expect(id).toMatch(CANONICAL)
    expect(isUuid(id)).toBe(true)
  })

  it('is version 7 with the RFC 9562 variant (bits 10)', () => {
    for (let i = 0; i < 1000; i++) {
      const hex = newId().replace(/-/g, '')
      expect(hex[12]).toBe('7')
      const variant = Number.parseInt(hex[16] as string, 16)
      expect(variant >> 2).toBe(0b10)
    }
  })

  it('puts the given millisecond timestamp in the first 48 bits', () => {
    for (const ms of [0, 1, 1_700_000_000_000, 1_234_567_890_123, 2 ** 48 - 1]) {
      expect(timestampOf(newId(ms))).toBe(ms)
    }
    expect(newId(0).startsWith('00000000-0000-7')).toBe(true)
    expect(newId(2 ** 48 - 1).startsWith('ffffffff-ffff-7')).toBe(true)
  })

  it('uses the current time by default', () => {
    const before = Date.now()
    const id = newId()
    const after = Date.now()
    expect(timestampOf(id)).toBeGreaterThanOrEqual(before)
    expect(timestampOf(id)).toBeLessThanOrEqual(after)
  })

  it('keeps version and variant for any timestamp', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 48 - 1 }), (ms) => {
        const id = newId(ms)
        expect(id).toMatch(CANONICAL)
        expect(id[14]).toBe('7')
        expect('89ab').toContain(id[19])
        expect(timestampOf(id)).toBe(ms)
      }),
    )
  })

  it('sorts ids made in a later millisecond after earlier ones, as text', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 48 - 2 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        (ms, gap) => {
          const later = Math.min(ms + gap, 2 ** 48 - 1)
          expect(newId(ms) < newId(later)).toBe(true)
        },
      ),
    )
    const ids = Array.from({ length: 500 }, (_, i) => newId(1_700_000_000_000 + i))
    expect([...ids].sort()).toEqual(ids)
  })

  it('sorts ids made later in real time after earlier ones', async () => {
    const first = newId()
    await new Promise((resolve) => setTimeout(resolve, 3))
    const second = newId()
    expect(first < second).toBe(true)
  })

  it('sorts ids made within one millisecond in creation order', () => {
    const ms = Date.now() + 10_000
    const ids = Array.from({ length: 2_000 }, () => newId(ms))
    expect([...ids].sort()).toEqual(ids)
    for (const id of ids) {
      expect(id).toMatch(CANONICAL)
      expect(id[14]).toBe('7')
      expect('89ab').toContain(id[19])
      expect(timestampOf(id)).toBe(ms)
    }
  })

  it('makes 10,000 distinct ids, also within one millisecond', () => {
    const ms = Date.now()
    const sameMs = new Set(Array.from({ length: 10_000 }, () => newId(ms)))
    expect(sameMs.size).toBe(10_000)
    const any = new Set(Array.from({ length: 10_000 }, () => newId()))
    expect(any.size).toBe(10_000)
  })
})

describe('isUuid', () => {
  it.each([
    '00000000-0000-0000-0000-000000000000',
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
    '6f9619ff-8b86-d011-b42d-00c04fc964ff', // v1-style
    '0190a4f5-1c2d-7e3f-8a1b-2c3d4e5f6a7b', // v7
    'f47ac10b-58cc-4372-a567-0e02b2c3d479', // v4
    'F47AC10B-58CC-4372-A567-0E02B2C3D479', // upper case
    'f47AC10b-58cC-4372-a567-0E02b2c3d479', // mixed case
  ])('accepts %s', (id) => {
    expect(isUuid(id)).toBe(true)
  })

  it('accepts any random UUID of any version', () => {
    fc.assert(
      fc.property(fc.uuid(), fc.boolean(), (id, upper) => {
        expect(isUuid(upper ? id.toUpperCase() : id)).toBe(true)
      }),
    )
    expect(isUuid(crypto.randomUUID())).toBe(true)
  })

  it.each([
    ['empty', ''],
    ['too short', 'f47ac10b-58cc-4372-a567-0e02b2c3d47'],
    ['too long', 'f47ac10b-58cc-4372-a567-0e02b2c3d4790'],
    ['no dashes', 'f47ac10b58cc4372a5670e02b2c3d479'],
    ['dashes misplaced', 'f47ac10b5-8cc-4372-a567-0e02b2c3d479'],
    ['a non-hex letter', 'g47ac10b-58cc-4372-a567-0e02b2c3d479'],
    ['braces', '{f47ac10b-58cc-4372-a567-0e02b2c3d479}'],
    ['urn prefix', 'urn:uuid:f47ac10b-58cc-4372-a567-0e02b2c3d479'],
    ['a leading space', ' f47ac10b-58cc-4372-a567-0e02b2c3d479'],
    ['a trailing newline', 'f47ac10b-58cc-4372-a567-0e02b2c3d479\n'],
    ['underscores', 'f47ac10b_58cc_4372_a567_0e02b2c3d479'],
    ['full-width digits', '０47ac10b-58cc-4372-a567-0e02b2c3d479'],
  ])('rejects %s', (_, value) => {
    expect(isUuid(value)).toBe(false)
  })

  it('rejects any string that is not 36 characters', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 80 }).filter((s) => s.length !== 36),
        (s) => {
          expect(isUuid(s)).toBe(false)
        },
      ),
    )
  })
})
