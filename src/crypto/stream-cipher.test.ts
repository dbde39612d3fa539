import { randomBytes } from 'node:crypto'
import { Readable, type Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { IntegrityError, KEY_BYTES, TAG_BYTES } from './aead.js'
import { CHUNK_BYTES, decryptStream, encryptedSize, encryptStream } from './stream-cipher.js'

const SEALED = CHUNK_BYTES + TAG_BYTES
const MIB = 1024 * 1024
const SIZES = [0, 1, 65_535, 65_536, 65_537, 3 * 65_536, MIB + 7]

/** Cuts `data` into pieces of the given sizes (cycled), as a network would deliver it. */
function cut(data: Buffer, sizes: number[]): Buffer[] {
  const pieces: Buffer[] = []
  let at = 0
  let i = 0
  while (at < data.length) {
    const n = Math.max(1, sizes.length ? (sizes[i++ % sizes.length] as number) : data.length)
    pieces.push(data.subarray(at, at + n))
    at += n
  }
  return pieces
}

interface Outcome {
  output: Buffer
  error: unknown
}

/** Feeds the pieces through the transform; keeps what came out even when it fails. */
async function run(transform: Transform, pieces: Buffer[]): Promise<Outcome> {
  const out: Buffer[] = []
  let error: unknown
  try {
    await pipeline(Readable.from(pieces), transform, async (source: AsyncIterable<Buffer>) => {
      for await (const chunk of source) out.push(chunk)
    })
  } catch (e) {
    error = e
  }
  return { output: Buffer.concat(out), error }
}

async function encrypt(key: Buffer, plain: Buffer, sizes: number[] = []): Promise<Buffer> {
  const { output, error } = await run(encryptStream(key), cut(plain, sizes))
  if (error) throw error
  return output
}

async function decrypt(key: Buffer, sealed: Buffer, sizes: number[] = []): Promise<Outcome> {
  return run(decryptStream(key), cut(sealed, sizes))
}

/** The sealed chunks of a ciphertext (all full-size but the last). */
function chunksOf(sealed: Buffer): Buffer[] {
  const chunks: Buffer[] = []
  for (let at = 0; at < sealed.length; at += SEALED) chunks.push(sealed.subarray(at, at + SEALED))
  if (sealed.length === 0) chunks.push(Buffer.alloc(0))
  return chunks
}

/** Decryption must fail with IntegrityError and emit only whole authenticated chunks of `plain`. */
function expectFailsClosed(outcome: Outcome, plain: Buffer, label = ''): void {
  expect(outcome.error, label).toBeInstanceOf(IntegrityError)
  expect(outcome.output.length % CHUNK_BYTES, label).toBe(0)
  expect(outcome.output.length, label).toBeLessThan(Math.max(plain.length, 1))
  expect(outcome.output.equals(plain.subarray(0, outcome.output.length)), label).toBe(true)
}

const pieceSizes = fc.array(fc.integer({ min: 1, max: 200_000 }), { minLength: 1, maxLength: 12 })

describe('stream cipher round trip', () => {
  for (const size of SIZES) {
    it(`round-trips ${size} bytes fed in random piece sizes`, async () => {
      const key = randomBytes(KEY_BYTES)
      const plain = randomBytes(size)
      await fc.assert(
        fc.asyncProperty(pieceSizes, pieceSizes, async (inSizes, outSizes) => {
          const sealed = await encrypt(key, plain, inSizes)
          expect(sealed.length).toBe(encryptedSize(size))
          const back = await decrypt(key, sealed, outSizes)
          expect(back.error).toBeUndefined()
          expect(back.output.equals(plain)).toBe(true)
        }),
        { numRuns: size > 200_000 ? 8 : 25 },
      )
    })
  }

  it('round-trips any size with tiny pieces too', async () => {
    const key = randomBytes(KEY_BYTES)
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 3 * CHUNK_BYTES + 5 }),
        fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 6 }),
        async (size, sizes) => {
          const plain = randomBytes(size)
          const sealed = await encrypt(key, plain, sizes)
          expect(sealed.length).toBe(encryptedSize(size))
          const back = await decrypt(key, sealed, sizes)
          expect(back.error).toBeUndefined()
          expect(back.output.equals(plain)).toBe(true)
        },
      ),
      { numRuns: 40 },
    )
  })

  it('encryptedSize counts one tag per 64 KiB chunk, and one for empty content', () => {
    expect(encryptedSize(0)).toBe(TAG_BYTES)
    expect(encryptedSize(1)).toBe(1 + TAG_BYTES)
    expect(encryptedSize(CHUNK_BYTES)).toBe(CHUNK_BYTES + TAG_BYTES)
    expect(encryptedSize(CHUNK_BYTES + 1)).toBe(CHUNK_BYTES + 1 + 2 * TAG_BYTES)
    expect(encryptedSize(MIB + 7)).toBe(MIB + 7 + 17 * TAG_BYTES)
    // the 50 MB BLOB limit
    expect(encryptedSize(52_428_800)).toBe(52_428_800 + 800 * TAG_BYTES)
  })

  it('does not contain the plaintext, and one key never gives the same bytes for two contents', async () => {
    const key = randomBytes(KEY_BYTES)
    const plain = Buffer.from('canary-0c9f4e2b '.repeat(10_000))
    const sealed = await encrypt(key, plain)
    expect(sealed.includes(Buffer.from('canary-0c9f4e2b'))).toBe(false)
    // a fresh key per object: the same content under two keys shares nothing
    const other = await encrypt(randomBytes(KEY_BYTES), plain)
    expect(other.subarray(0, 64).equals(sealed.subarray(0, 64))).toBe(false)
  })

  it('refuses keys that are not 32 bytes', () => {
    for (const n of [0, 16, 31, 33]) {
      expect(() => encryptStream(randomBytes(n))).toThrow('stream key must be 32 bytes')
      expect(() => decryptStream(randomBytes(n))).toThrow('stream key must be 32 bytes')
    }
  })
})

describe('stream cipher tampering fails closed', () => {
  const key = randomBytes(KEY_BYTES)

  it('flipping any byte of a small object fails (every position)', async () => {
    for (const size of [0, 1, 100]) {
      const plain = randomBytes(size)
      const sealed = await encrypt(key, plain)
      for (let i = 0; i < sealed.length; i++) {
        const tampered = Buffer.from(sealed)
        tampered[i] = (tampered[i] as number) ^ 0x01
        expectFailsClosed(await decrypt(key, tampered), plain, `size ${size} byte ${i}`)
      }
    }
  })

  it('flipping any byte of a multi-chunk object fails, emitting only the chunks before it', async () => {
    const plain = randomBytes(3 * CHUNK_BYTES + 100)
    const sealed = await encrypt(key, plain)
    const boundaries = chunksOf(sealed).flatMap((_, c) => [c * SEALED, c * SEALED + SEALED - 1])
    const check = async (i: number, mask: number) => {
      const tampered = Buffer.from(sealed)
      tampered[i] = (tampered[i] as number) ^ mask
      const outcome = await decrypt(key, tampered)
      expectFailsClosed(outcome, plain, `byte ${i}`)
      // nothing past the chunks before the damaged one was released
      expect(outcome.output.length).toBeLessThanOrEqual(Math.floor(i / SEALED) * CHUNK_BYTES)
    }
    for (const i of boundaries.filter((b) => b < sealed.length)) await check(i, 0x80)
    await check(sealed.length - 1, 0x01)
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: sealed.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        check,
      ),
      { numRuns: 150 },
    )
  })

  it('truncating the last chunk, or cutting at any chunk boundary, fails', async () => {
    const plain = randomBytes(3 * CHUNK_BYTES + 100)
    const sealed = await encrypt(key, plain)
    const chunks = chunksOf(sealed)
    expect(chunks).toHaveLength(4)
    const cuts = [
      sealed.length - 1,
      sealed.length - TAG_BYTES,
      sealed.length - 100,
      3 * SEALED + 1,
      3 * SEALED, // the whole last chunk dropped
      2 * SEALED, // the last two dropped
      SEALED,
      SEALED - 1,
      TAG_BYTES,
      0,
    ]
    for (const n of cuts)
      expectFailsClosed(await decrypt(key, sealed.subarray(0, n)), plain, `${n}`)
    // an object whose content is exactly one chunk, cut to nothing
    expectFailsClosed(await decrypt(key, Buffer.alloc(0)), Buffer.alloc(0))
  })

  it('dropping a middle chunk fails', async () => {
    const plain = randomBytes(3 * CHUNK_BYTES + 100)
    const c = chunksOf(await encrypt(key, plain))
    for (const drop of [0, 1, 2]) {
      const rest = Buffer.concat(c.filter((_, i) => i !== drop))
      expectFailsClosed(await decrypt(key, rest), plain, `drop ${drop}`)
    }
  })

  it('swapping or duplicating chunks fails', async () => {
    const plain = randomBytes(3 * CHUNK_BYTES + 100)
    const [c0, c1, c2, c3] = chunksOf(await encrypt(key, plain)) as [Buffer, Buffer, Buffer, Buffer]
    const reorderings = [
      [c1, c0, c2, c3],
      [c0, c2, c1, c3],
      [c0, c1, c3, c2],
      [c0, c0, c2, c3],
      [c0, c1, c2, c2, c3],
    ]
    for (const [n, chunks] of reorderings.entries()) {
      expectFailsClosed(await decrypt(key, Buffer.concat(chunks)), plain, `reordering ${n}`)
    }
  })

  it('appending a chunk fails: after the last chunk nothing may follow', async () => {
    const plain = randomBytes(2 * CHUNK_BYTES + 10)
    const sealed = await encrypt(key, plain)
    const chunks = chunksOf(sealed)
    const last = chunks[chunks.length - 1] as Buffer
    // the last chunk again, a chunk of another object under the same key, one byte, a tag
    const longer = await encrypt(key, randomBytes(4 * CHUNK_BYTES))
    for (const extra of [
      last,
      chunksOf(longer)[2] as Buffer,
      chunksOf(longer)[3] as Buffer,
      Buffer.from([0]),
      randomBytes(TAG_BYTES),
      await encrypt(key, Buffer.alloc(0)),
    ]) {
      expectFailsClosed(await decrypt(key, Buffer.concat([sealed, extra])), plain)
    }
    // a full-size last chunk followed by chunks 1.. of another object under the same key
    const exact = randomBytes(CHUNK_BYTES)
    const sealedExact = await encrypt(key, exact)
    expect(sealedExact.length).toBe(SEALED)
    for (const tail of [chunksOf(longer).slice(1), chunksOf(longer).slice(3)]) {
      expectFailsClosed(await decrypt(key, Buffer.concat([sealedExact, ...tail])), exact)
    }
  })

  it('content sealed under another key fails at the first chunk', async () => {
    const plain = randomBytes(2 * CHUNK_BYTES)
    const sealed = await encrypt(randomBytes(KEY_BYTES), plain)
    const outcome = await decrypt(key, sealed)
    expectFailsClosed(outcome, plain)
    expect(outcome.output.length).toBe(0)
  })
})
