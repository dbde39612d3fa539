import { createHash, randomUUID } from 'node:crypto'
import { Readable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BlobNotFoundError, type BlobStore, blobKey } from './blob-store.js'

/**
 * The behaviour every `BlobStore` must share, as a Vitest suite: call it from a test file with
 * a factory for the store under test. Each case uses its own fresh keys.
 */
export interface BlobStoreFixture {
  store: BlobStore
  close(): Promise<void>
}

const KiB = 1024
const MiB = 1024 * KiB
const BLOCK = 64 * KiB

/** Block `index` of the deterministic byte sequence for `seed` (xorshift32). */
function block(seed: number, index: number): Buffer {
  const words = new Uint32Array(BLOCK / 4)
  let x = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35)) | 0
  if (x === 0) x = 1
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    words[i] = x >>> 0
  }
  return Buffer.from(words.buffer)
}

/**
 * `size` pseudo-random bytes for `seed`, made block by block as the consumer reads. With
 * `fail`, the stream is destroyed with `fail.error` once `fail.after` bytes have been read.
 */
export function generatedStream(
  size: number,
  seed: number,
  fail?: { after: number; error: Error },
): Readable {
  let offset = 0
  let index = 0
  return new Readable({
    highWaterMark: BLOCK,
    read() {
      if (fail && offset >= fail.after) {
        this.destroy(fail.error)
        return
      }
      if (offset >= size) {
        this.push(null)
        return
      }
      const n = Math.min(BLOCK, size - offset, fail ? fail.after - offset : BLOCK)
      const chunk = block(seed, index++)
      offset += n
      this.push(n === BLOCK ? chunk : chunk.subarray(0, n))
    },
  })
}

/** SHA-256 and length of what `generatedStream(size, seed)` produces, without keeping it. */
export function expectedDigest(size: number, seed: number): { sha256: string; size: number } {
  const hash = createHash('sha256')
  for (let offset = 0, index = 0; offset < size; offset += BLOCK, index++) {
    const chunk = block(seed, index)
    hash.update(size - offset >= BLOCK ? chunk : chunk.subarray(0, size - offset))
  }
  return { sha256: hash.digest('hex'), size }
}

/** SHA-256 and length of a stream, read to the end. */
export async function digestOf(stream: Readable): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256')
  let size = 0
  for await (const chunk of stream) {
    const bytes = chunk as Buffer
    hash.update(bytes)
    size += bytes.length
  }
  return { sha256: hash.digest('hex'), size }
}

/** A key shaped like the server's own: `a/<uuid>/v/<uuid>/b/<uuid>/<uuid>`. */
export function freshKey(): string {
  return blobKey(randomUUID(), randomUUID(), randomUUID(), randomUUID())
}

/** An error type callers recognise, like the size limit the blob routes raise mid-stream. */
class SourceFailed extends Error {
  constructor() {
    super('source stream failed on purpose')
    this.name = 'SourceFailed'
  }
}

export function runBlobStoreContract(
  name: string,
  makeStore: () => Promise<BlobStoreFixture>,
): void {
  describe(`BlobStore contract: ${name}`, () => {
    let fixture: BlobStoreFixture | undefined
    const store = (): BlobStore => {
      if (!fixture) throw new Error('store not started')
      return fixture.store
    }

    beforeAll(async () => {
      fixture = await makeStore()
    })
    afterAll(async () => {
      await fixture?.close()
    })

    it.each([
      ['empty', 0],
      ['1 byte', 1],
      ['1 MiB', MiB],
      ['12 MiB (several multipart parts, last one short)', 12 * MiB + 12_345],
    ])('put then get round-trips a %s stream', async (_label, size) => {
      const key = freshKey()
      const seed = size + 7
      await expect(store().put(key, generatedStream(size, seed))).resolves.toEqual({ size })
      expect(await digestOf(await store().get(key))).toEqual(expectedDigest(size, seed))
    })

    it('check resolves while the store is reachable (readiness probe)', async () => {
      await expect(store().check()).resolves.toBeUndefined()
    })

    it('exists is true for a stored object and false for an unknown key', async () => {
      const key = freshKey()
      await store().put(key, generatedStream(10, 1))
      expect(await store().exists(key)).toBe(true)
      expect(await store().exists(freshKey())).toBe(false)
    })

    it('get of a missing key rejects with BlobNotFoundError', async () => {
      await expect(store().get(freshKey())).rejects.toBeInstanceOf(BlobNotFoundError)
    })

    it('delete removes the object; deleting again, or a key never stored, is fine', async () => {
      const key = freshKey()
      await store().put(key, generatedStream(1000, 2))
      await store().delete(key)
      await expect(store().get(key)).rejects.toBeInstanceOf(BlobNotFoundError)
      expect(await store().exists(key)).toBe(false)
      await expect(store().delete(key)).resolves.toBeUndefined()
      await expect(store().delete(freshKey())).resolves.toBeUndefined()
    })

    it.each([
      ['before any byte', 0, 10 * KiB],
      ['inside the first part', 100 * KiB, MiB],
      ['after the first multipart part', 7 * MiB, 12 * MiB],
    ])(
      'a source that errors %s rejects put with that error and leaves no object',
      async (_l, after, size) => {
        const key = freshKey()
        const error = new SourceFailed()
        const source = generatedStream(size, 3, { after, error })
        await expect(store().put(key, source)).rejects.toBe(error)
        expect(await store().exists(key)).toBe(false)
        await expect(store().get(key)).rejects.toBeInstanceOf(BlobNotFoundError)
      },
    )

    it('a source that has already failed when put is called rejects put with its error', async () => {
      const key = freshKey()
      const error = new SourceFailed()
      const source = generatedStream(1000, 4)
      source.destroy(error) // 'error' is emitted on the next tick, while put is under way
      await expect(store().put(key, source)).rejects.toBe(error)
      expect(await store().exists(key)).toBe(false)
    })

    it('two puts of different keys in parallel both succeed', async () => {
      const a = freshKey()
      const b = freshKey()
      const size = 6 * MiB + 1
      const results = await Promise.all([
        store().put(a, generatedStream(size, 11)),
        store().put(b, generatedStream(size, 12)),
      ])
      expect(results).toEqual([{ size }, { size }])
      expect(await digestOf(await store().get(a))).toEqual(expectedDigest(size, 11))
      expect(await digestOf(await store().get(b))).toEqual(expectedDigest(size, 12))
    })

    it('keys made by blobKey() round-trip and do not collide across blobs', async () => {
      const account = randomUUID()
      const vault = randomUUID()
      const blob = randomUUID()
      const first = blobKey(account, vault, blob, randomUUID())
      const second = blobKey(account, vault, blob, randomUUID())
      await store().put(first, generatedStream(300, 21))
      await store().put(second, generatedStream(400, 22))
      expect(await digestOf(await store().get(first))).toEqual(expectedDigest(300, 21))
      expect(await digestOf(await store().get(second))).toEqual(expectedDigest(400, 22))
      await store().delete(first)
      expect(await store().exists(first)).toBe(false)
      expect(await store().exists(second)).toBe(true)
    })

    it('list names every object under a prefix with its size, and only those', async () => {
      const account = randomUUID()
      const vault = randomUUID()
      const keys = [0, 1, 2].map(() => blobKey(account, vault, randomUUID(), randomUUID()))
      for (const [i, key] of keys.entries()) await store().put(key, generatedStream(100 + i, i))
      const elsewhere = freshKey()
      await store().put(elsewhere, generatedStream(5, 9))
      const listed = async (prefix: string) => {
        const found: { key: string; size: number }[] = []
        for await (const object of store().list(prefix)) found.push(object)
        return found.sort((a, b) => (a.key < b.key ? -1 : 1))
      }
      const expected = keys
        .map((key, i) => ({ key, size: 100 + i }))
        .sort((a, b) => (a.key < b.key ? -1 : 1))
      expect(await listed(`a/${account}/`)).toEqual(expected)
      expect(await listed(`a/${account}/v/${vault}/b/`)).toEqual(expected)
      await store().delete(keys[1] as string)
      expect((await listed(`a/${account}/`)).map((o) => o.key)).not.toContain(keys[1])
      expect(await listed(`a/${randomUUID()}/`)).toEqual([])
      expect((await listed('a/')).map((o) => o.key)).toEqual(
        expect.arrayContaining([elsewhere, keys[0]]),
      )
    })

    it('a get stream abandoned half-way does not disturb the store', async () => {
      const key = freshKey()
      await store().put(key, generatedStream(2 * MiB, 31))
      const stream = await store().get(key)
      for await (const _chunk of stream) break // leaving the loop destroys the stream
      expect(await digestOf(await store().get(key))).toEqual(expectedDigest(2 * MiB, 31))
      await store().delete(key)
      expect(await store().exists(key)).toBe(false)
    })
  })
}
