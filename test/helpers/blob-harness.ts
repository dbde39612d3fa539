import { createHash } from 'node:crypto'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Readable } from 'node:stream'
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3'
import type { BlobStore } from '../../src/blob/blob-store.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { S3BlobStore } from '../../src/blob/s3-blob-store.js'
import type { TestApp } from './app.js'
import { startS3Server } from './s3.js'

export type StoreKind = 'fs' | 's3'
export const STORE_KINDS: StoreKind[] = ['fs', 's3']

/** Delegates to a real store and counts the calls, so a test can say "nothing was stored". */
export class CountingStore implements BlobStore {
  puts = 0
  deletes = 0
  constructor(readonly inner: BlobStore) {}
  get kind() {
    return this.inner.kind
  }
  put(key: string, body: Readable) {
    this.puts++
    return this.inner.put(key, body)
  }
  get(key: string) {
    return this.inner.get(key)
  }
  delete(key: string) {
    this.deletes++
    return this.inner.delete(key)
  }
  exists(key: string) {
    return this.inner.exists(key)
  }
  check() {
    return this.inner.check()
  }
  list(prefix: string) {
    return this.inner.list(prefix)
  }
}

export interface BlobStoreHarness {
  kind: StoreKind
  store: CountingStore
  /**
   * Everything the backing storage holds, sorted: for fs every file under the root (temporary
   * files included, as their paths); for S3 every key of the bucket (ListObjectsV2).
   */
  objects(): Promise<string[]>
  close(): Promise<void>
}

/** A fresh, empty blob store of the given kind (S3: an s3rver on a local port). */
export async function openBlobStore(kind: StoreKind): Promise<BlobStoreHarness> {
  if (kind === 'fs') {
    const dir = await mkdtemp(path.join(tmpdir(), 'coffer-blob-http-'))
    const root = path.join(dir, 'blobs')
    return {
      kind,
      store: new CountingStore(new FsBlobStore(root)),
      async objects() {
        const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(
          (e: { code?: string }) => {
            if (e.code === 'ENOENT') return []
            throw e
          },
        )
        return entries
          .filter((e) => !e.isDirectory())
          .map((e) =>
            path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join('/'),
          )
          .sort()
      },
      close: () => rm(dir, { recursive: true, force: true }),
    }
  }
  const server = await startS3Server()
  const s3 = new S3BlobStore({
    endpoint: server.endpoint,
    region: server.region,
    bucket: server.bucket,
    accessKeyId: server.accessKeyId,
    secretAccessKey: server.secretAccessKey,
    forcePathStyle: true,
  })
  const client = new S3Client({
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  })
  return {
    kind,
    store: new CountingStore(s3),
    async objects() {
      const keys: string[] = []
      let token: string | undefined
      do {
        const page = await client.send(
          new ListObjectsV2Command({ Bucket: server.bucket, ContinuationToken: token }),
        )
        for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key)
        token = page.IsTruncated ? page.NextContinuationToken : undefined
      } while (token)
      return keys.sort()
    },
    async close() {
      client.destroy()
      s3.close()
      await server.close()
    },
  }
}

/** The object keys the `blobs` rows name, sorted. */
export async function rowObjectKeys(t: TestApp): Promise<string[]> {
  const rows = await t.deps.store.db.selectFrom('blobs').select('object_key').execute()
  return rows.map((r) => r.object_key).sort()
}

/** Polls until the store holds exactly the objects of existing rows (or fails after `ms`). */
export async function settledObjects(
  h: BlobStoreHarness,
  t: TestApp,
  ms = 3_000,
): Promise<{ objects: string[]; rows: string[] }> {
  const deadline = Date.now() + ms
  for (;;) {
    const [objects, rows] = await Promise.all([h.objects(), rowObjectKeys(t)])
    if (JSON.stringify(objects) === JSON.stringify(rows) || Date.now() > deadline)
      return { objects, rows }
    await new Promise((r) => setTimeout(r, 50))
  }
}

const BLOCK = 64 * 1024

/** Block `index` of a deterministic pseudo-random byte sequence for `seed` (xorshift32). */
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

/** `size` deterministic pseudo-random bytes (small sizes: in memory). */
export function bytes(size: number, seed = 1): Buffer {
  const out = Buffer.alloc(size)
  for (let i = 0, offset = 0; offset < size; i++, offset += BLOCK) {
    block(seed, i).copy(out, offset, 0, Math.min(BLOCK, size - offset))
  }
  return out
}

/** The same bytes as `bytes(size, seed)`, generated as they are read (never all in memory). */
export async function* generated(size: number, seed = 1): AsyncGenerator<Buffer> {
  for (let i = 0, offset = 0; offset < size; i++, offset += BLOCK) {
    const b = block(seed, i)
    yield size - offset >= BLOCK ? b : b.subarray(0, size - offset)
  }
}

/** SHA-256 (hex) of `generated(size, seed)` without holding it. */
export async function generatedDigest(size: number, seed = 1): Promise<string> {
  const h = createHash('sha256')
  for await (const chunk of generated(size, seed)) h.update(chunk)
  return h.digest('hex')
}

export const sha256 = (data: Buffer | Uint8Array) => createHash('sha256').update(data).digest('hex')

export type Part =
  | { name: string; value: string }
  | { name: string; filename?: string; type?: string; data: Buffer | string }

/** A multipart/form-data body built by hand, parts in the given order. */
export function multipart(
  parts: Part[],
  boundary = `----coffer${Math.random().toString(16).slice(2)}`,
) {
  const chunks: Buffer[] = []
  for (const p of parts) {
    if ('value' in p) {
      chunks.push(
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\n\r\n${p.value}\r\n`,
        ),
      )
      continue
    }
    const filename = p.filename === undefined ? '' : `; filename="${p.filename}"`
    const type = p.type === undefined ? '' : `Content-Type: ${p.type}\r\n`
    chunks.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"${filename}\r\n${type}\r\n`,
      ),
      typeof p.data === 'string' ? Buffer.from(p.data) : p.data,
      Buffer.from('\r\n'),
    )
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return {
    payload: Buffer.concat(chunks),
    contentType: `multipart/form-data; boundary=${boundary}`,
    boundary,
  }
}

/**
 * A streamed multipart body: text parts, then one file part of `size` generated bytes. `onBytes`
 * sees the running count of file bytes handed out (for aborting mid-upload).
 */
export function streamedMultipart(
  file: { filename: string; type: string; size: number; seed?: number },
  fields: Record<string, string> = {},
  onBytes?: (sent: number) => void,
) {
  const boundary = `----coffer${Math.random().toString(16).slice(2)}`
  const head = Object.entries(fields)
    .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
    .join('')
  async function* body(): AsyncGenerator<Uint8Array> {
    yield Buffer.from(
      `${head}--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.filename}"\r\nContent-Type: ${file.type}\r\n\r\n`,
    )
    let sent = 0
    for await (const chunk of generated(file.size, file.seed ?? 1)) {
      sent += chunk.length
      onBytes?.(sent)
      yield chunk
    }
    yield Buffer.from(`\r\n--${boundary}--\r\n`)
  }
  return {
    stream: Readable.toWeb(Readable.from(body())) as ReadableStream<Uint8Array>,
    contentType: `multipart/form-data; boundary=${boundary}`,
  }
}
