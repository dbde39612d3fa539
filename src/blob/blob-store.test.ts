import { mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startS3Server } from '../../test/helpers/s3.js'
import {
  digestOf,
  expectedDigest,
  freshKey,
  generatedStream,
  runBlobStoreContract,
} from './blob-store.contract.js'
import { FsBlobStore, InvalidBlobKeyError } from './fs-blob-store.js'
import { S3BlobStore } from './s3-blob-store.js'

const MiB = 1024 * 1024

runBlobStoreContract('fs', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'coffer-blobs-'))
  return {
    store: new FsBlobStore(path.join(dir, 'blobs')),
    close: () => rm(dir, { recursive: true, force: true }),
  }
})

runBlobStoreContract('s3 (s3rver)', async () => {
  const server = await startS3Server()
  const store = new S3BlobStore({ ...server, forcePathStyle: true, prefix: 'coffer' })
  return {
    store,
    async close() {
      store.close()
      await server.close()
    },
  }
})

/** Every file (not directory) under `dir`, relative to it. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => !e.isDirectory())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort()
}

describe('FsBlobStore', () => {
  let dir: string
  let root: string
  let store: FsBlobStore

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'coffer-fs-blobs-'))
    root = path.join(dir, 'root')
    await mkdir(root)
    store = new FsBlobStore(root)
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it.each([
    ['a parent segment', '../escape'],
    ['a parent segment inside the key', 'a/../../escape'],
    ['a trailing parent segment', 'a/b/..'],
    ['an absolute path', '/tmp/coffer-escape'],
    ['an absolute path into the parent', '<dir>/escape'],
    ['a null byte', 'a/b\0c'],
    ['a backslash', 'a\\..\\..\\escape'],
    ['an empty key', ''],
    ['an empty segment', 'a//b'],
    ['a dot segment', 'a/./b'],
  ])('refuses a key with %s and writes nothing outside the root', async (_label, raw) => {
    const key = raw.replace('<dir>', dir)
    const before = await filesUnder(dir)
    await expect(store.put(key, generatedStream(100, 1))).rejects.toBeInstanceOf(
      InvalidBlobKeyError,
    )
    await expect(store.get(key)).rejects.toBeInstanceOf(InvalidBlobKeyError)
    await expect(store.exists(key)).rejects.toBeInstanceOf(InvalidBlobKeyError)
    await expect(store.delete(key)).rejects.toBeInstanceOf(InvalidBlobKeyError)
    expect(await filesUnder(dir)).toEqual(before)
    await expect(stat('/tmp/coffer-escape')).rejects.toMatchObject({ code: 'ENOENT' })
  })

  it('writes files 0600 in directories 0700', async () => {
    const key = freshKey()
    await store.put(key, generatedStream(10, 1))
    const file = store.pathFor(key)
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    for (let d = path.dirname(file); d !== root; d = path.dirname(d)) {
      expect((await stat(d)).mode & 0o777).toBe(0o700)
    }
  })

  it.each([
    ['small', 100, 1000],
    ['large', 3 * MiB, 5 * MiB],
  ])('a failed %s put leaves no file at all under the root', async (_label, after, size) => {
    const fresh = new FsBlobStore(path.join(dir, `failed-${size}`))
    const error = new Error('boom')
    await expect(fresh.put(freshKey(), generatedStream(size, 4, { after, error }))).rejects.toBe(
      error,
    )
    expect(await filesUnder(fresh.root)).toEqual([])
  })

  it('an object is not visible until its put has finished', async () => {
    const key = freshKey()
    const source = new PassThrough()
    const putting = store.put(key, source)
    source.write(Buffer.alloc(1000, 1))
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(await store.exists(key)).toBe(false)
    await expect(store.get(key)).rejects.toThrow('not found')
    source.end(Buffer.alloc(24, 2))
    await expect(putting).resolves.toEqual({ size: 1024 })
    expect(await store.exists(key)).toBe(true)
    expect((await digestOf(await store.get(key))).size).toBe(1024)
    expect(await filesUnder(root)).not.toContainEqual(expect.stringMatching(/\.tmp$/))
  })

  it('list skips an upload still being written, then names the object once it is', async () => {
    const key = freshKey()
    const prefix = key.slice(0, key.lastIndexOf('/') + 1)
    const source = new PassThrough()
    const putting = store.put(key, source)
    source.write(Buffer.alloc(1000, 1))
    const listed = async () => {
      const found: string[] = []
      for await (const o of store.list(prefix)) found.push(o.key)
      return found
    }
    // The upload's temp file exists (however slowly the machine gets there).
    const folder = path.dirname(store.pathFor(key))
    const tempFiles = () => filesUnder(folder).catch(() => [] as string[])
    for (let i = 0; i < 250 && (await tempFiles()).length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(await tempFiles()).toHaveLength(1)
    expect(await listed()).toEqual([])
    source.end()
    await putting
    expect(await listed()).toEqual([key])
  })

  it('reads from the open file even if the object is deleted after get', async () => {
    const key = freshKey()
    await store.put(key, generatedStream(MiB, 5))
    const stream = await store.get(key)
    await store.delete(key)
    expect(await digestOf(stream)).toEqual(expectedDigest(MiB, 5))
  })
})

describe('S3BlobStore', () => {
  it('buffers about two parts of a stream the server is not taking, and still fails fast', async () => {
    // A server that accepts connections and never answers: nothing the store reads can leave.
    const stalled = createServer(() => undefined)
    await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve))
    const { port } = stalled.address() as AddressInfo
    const store = new S3BlobStore({
      endpoint: `http://127.0.0.1:${port}`,
      region: 'us-east-1',
      bucket: 'stalled',
      accessKeyId: 'x',
      secretAccessKey: 'y',
      forcePathStyle: true,
    })
    try {
      let produced = 0
      const source = new Readable({
        read() {
          produced += 64 * 1024
          this.push(Buffer.alloc(64 * 1024, 7))
        },
      })
      const putting = store.put(freshKey(), source)
      putting.catch(() => undefined) // asserted below
      for (let last = -1; produced !== last; await sleep(200)) last = produced
      // One 5 MiB part waiting on the server and the next one filled, plus stream buffers.
      expect(produced).toBeGreaterThanOrEqual(10 * MiB)
      expect(produced).toBeLessThan(12 * MiB)

      const error = new Error('size limit exceeded')
      const started = Date.now()
      source.destroy(error)
      await expect(putting).rejects.toBe(error)
      expect(Date.now() - started).toBeLessThan(2_000) // not the 2-minute request timeout
    } finally {
      store.close()
      stalled.closeAllConnections()
      await new Promise((resolve) => stalled.close(resolve))
    }
  })
})
