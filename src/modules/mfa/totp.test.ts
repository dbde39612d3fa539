import { createHmac, randomBytes } from 'node:crypto'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { codeAt, codeForStep, keyUri, matchingSteps, stepAt, toBase32 } from './totp.js'

/** RFC 6238 Appendix B: the SHA-1 seed is the ASCII text "12345678901234567890". */
const RFC_SECRET = toBase32(Buffer.from('12345678901234567890', 'ascii'))

/** RFC 4226 §5.3, written out independently of the implementation under test. */
function referenceCode(raw: Buffer, step: number): string {
  const counter = Buffer.alloc(8)
  counter.writeBigUInt64BE(BigInt(step))
  const mac = createHmac('sha1', raw).update(counter).digest()
  const offset = (mac[mac.length - 1] as number) & 0x0f
  const binary = mac.readUInt32BE(offset) & 0x7fffffff
  return String(binary % 1_000_000).padStart(6, '0')
}

const at = (seconds: number) => new Date(seconds * 1000)

describe('totp', () => {
  it('gives the RFC 6238 SHA-1 test vectors (their last six digits)', () => {
    expect(RFC_SECRET).toBe('GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ')
    const vectors: [number, string][] = [
      [59, '94287082'],
      [1111111109, '07081804'],
      [1111111111, '14050471'],
      [1234567890, '89005924'],
      [2000000000, '69279037'],
      [20000000000, '65353130'],
    ]
    for (const [seconds, eight] of vectors) {
      expect(codeAt(RFC_SECRET, at(seconds))).toBe(eight.slice(2))
    }
  })

  it('agrees with an independent RFC 4226 implementation for random secrets and steps', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 10, maxLength: 64 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        (raw, step) => {
          expect(codeForStep(toBase32(raw), step)).toBe(referenceCode(Buffer.from(raw), step))
        },
      ),
      { numRuns: 300 },
    )
  })

  it('counts 30-second steps from the Unix epoch', () => {
    expect(stepAt(at(0))).toBe(0)
    expect(stepAt(new Date(29_999))).toBe(0)
    expect(stepAt(at(30))).toBe(1)
    expect(stepAt(at(1111111109))).toBe(37037036)
  })

  describe('window', () => {
    const raw = randomBytes(20)
    const secret = toBase32(raw)
    const n = 60_000_000
    const start = new Date(n * 30_000)
    const code = (step: number) => referenceCode(raw, step)

    it('accepts the step before, the current one and the one after, and names it', () => {
      for (const now of [start, new Date(start.getTime() + 29_999)]) {
        expect(matchingSteps(secret, code(n - 1), now)).toEqual([n - 1])
        expect(matchingSteps(secret, code(n), now)).toEqual([n])
        expect(matchingSteps(secret, code(n + 1), now)).toEqual([n + 1])
      }
    })

    it('rejects codes two steps away, on both edges of the current step', () => {
      // The first and the last millisecond of step n: n - 2 and n + 2 are outside either way.
      for (const now of [start, new Date(start.getTime() + 29_999)]) {
        for (const far of [n - 2, n + 2]) {
          // A far code may equal a near one by coincidence; then it is that step that matched.
          const near = [n - 1, n, n + 1].filter((s) => code(s) === code(far))
          expect(matchingSteps(secret, code(far), now)).toEqual(near)
        }
      }
      // One millisecond earlier is step n - 1: n + 1 leaves the window, n - 2 enters it.
      const before = new Date(start.getTime() - 1)
      expect(matchingSteps(secret, code(n - 2), before)).toContain(n - 2)
      expect(matchingSteps(secret, code(n + 1), before)).not.toContain(n + 1)
    })

    it('matches nothing for malformed codes, and ignores spaces', () => {
      const good = code(n)
      for (const bad of ['', '12345', '1234567', 'abcdef', `${good}0`, `-${good.slice(1)}`]) {
        expect(matchingSteps(secret, bad, start)).toEqual([])
      }
      // Full-width digits are not ASCII digits (and never reach timingSafeEqual's length check).
      expect(matchingSteps(secret, '１２３４５６', start)).toEqual([])
      expect(matchingSteps(secret, `${good.slice(0, 3)} ${good.slice(3)}`, start)).toEqual([n])
    })

    it('a code of another secret does not match', () => {
      const other = randomBytes(20)
      const foreign = referenceCode(other, n)
      const expected = [n - 1, n, n + 1].filter((s) => code(s) === foreign)
      expect(matchingSteps(secret, foreign, start)).toEqual(expected)
    })
  })

  it('builds the key URI with the issuer, colons replaced by underscores', () => {
    const uri = new URL(
      keyUri({ issuer: 'Acme: Health:EU', account: 'ada@example.com', secretBase32: RFC_SECRET }),
    )
    expect(uri.protocol).toBe('otpauth:')
    expect(uri.host).toBe('totp')
    expect(decodeURIComponent(uri.pathname)).toBe('/Acme_ Health_EU:ada@example.com')
    expect(uri.searchParams.get('issuer')).toBe('Acme_ Health_EU')
    expect(uri.searchParams.get('secret')).toBe(RFC_SECRET)
    expect(uri.searchParams.get('algorithm')).toBe('SHA1')
    expect(uri.searchParams.get('digits')).toBe('6')
    expect(uri.searchParams.get('period')).toBe('30')
  })
})
