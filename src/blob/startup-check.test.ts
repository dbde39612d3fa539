import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startS3Server, type TestS3Server } from '../../test/helpers/s3.js'
import type { BlobStore } from './blob-store.js'
import { FsBlobStore } from './fs-blob-store.js'
import { S3BlobStore } from './s3-blob-store.js'
import { BlobStoreUnusableError, checkBlobStoreAtStart } from './startup-check.js'

const dirs: string[] = []
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'coffer-blobcheck-'))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** A store whose check answers after `ms` (never, for Infinity). */
const slowStore = (ms: number): BlobStore =>
  ({
    kind: 's3',
    check: () => new Promise<void>((r) => (Number.isFinite(ms) ? setTimeout(r, ms) : undefined)),
  }) as unknown as BlobStore

const s3Target = (bucket: string, endpoint: string) =>
  ({ kind: 's3', bucket, endpoint, region: 'us-east-1' }) as const

async function failure(work: Promise<void>): Promise<string> {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(BlobStoreUnusableError)
  return (error as Error).message
}

describe('start-up check of a filesystem BLOB store', () => {
  it('creates the folder, proves it writable and leaves nothing in it', async () => {
    const dir = path.join(tempDir(), 'shared', 'blobs')
    await checkBlobStoreAtStart(
      new FsBlobStore(dir),
      { kind: 'fs', dir, dirSetting: 'COFFER_BLOB_DIR' },
      1000,
    )
    expect(readdirSync(dir)).toEqual([])
  })

  it('names the setting when the folder cannot be made (a file is in the way)', async () => {
    const file = path.join(tempDir(), 'not-a-folder')
    writeFileSync(file, 'x')
    const dir = path.join(file, 'blobs')
    const message = await failure(
      checkBlobStoreAtStart(
        new FsBlobStore(dir),
        { kind: 'fs', dir, dirSetting: 'COFFER_BLOB_DIR' },
        1000,
      ),
    )
    expect(message).toBe(
      `the BLOB store is not usable: COFFER_BLOB_DIR folder ${dir} cannot be created or written to by this process (ENOTDIR)`,
    )
    expect(existsSync(dir)).toBe(false)
  })
})

describe('start-up check of an S3 BLOB store (s3rver)', () => {
  let s3: TestS3Server
  const stores: S3BlobStore[] = []
  const storeOf = (bucket: string, endpoint = s3.endpoint, key = s3.accessKeyId) => {
    const store = new S3BlobStore({
      endpoint,
      bucket,
      region: s3.region,
      forcePathStyle: true,
      accessKeyId: key,
      secretAccessKey: s3.secretAccessKey,
    })
    stores.push(store)
    return store
  }
  beforeAll(async () => {
    s3 = await startS3Server('coffer-present')
  })
  afterAll(async () => {
    for (const s of stores) s.close()
    await s3.close()
  })

  it('passes for an existing bucket', async () => {
    await checkBlobStoreAtStart(
      storeOf('coffer-present'),
      s3Target('coffer-present', s3.endpoint),
      5000,
    )
  })

  it('names the bucket when it does not exist', async () => {
    const message = await failure(
      checkBlobStoreAtStart(storeOf('coffer-absent'), s3Target('coffer-absent', s3.endpoint), 5000),
    )
    expect(message).toBe(
      `the BLOB store is not usable: COFFER_S3_BUCKET "coffer-absent" does not exist at COFFER_S3_ENDPOINT ${s3.endpoint}`,
    )
  })

  it('names the credential settings when the keys are refused, without quoting them', async () => {
    const message = await failure(
      checkBlobStoreAtStart(
        storeOf('coffer-present', s3.endpoint, 'WRONGKEY'),
        s3Target('coffer-present', s3.endpoint),
        5000,
      ),
    )
    expect(message).toMatch(
      /refused access to COFFER_S3_BUCKET "coffer-present": check COFFER_S3_ACCESS_KEY_ID and COFFER_S3_SECRET_ACCESS_KEY/,
    )
    expect(message).not.toContain('WRONGKEY')
    expect(message).not.toContain(s3.secretAccessKey)
  })

  it('names the endpoint when nothing listens there', async () => {
    const closed = await unusedPort()
    const endpoint = `http://127.0.0.1:${closed}`
    const started = performance.now()
    const message = await failure(
      checkBlobStoreAtStart(
        storeOf('coffer-present', endpoint),
        s3Target('coffer-present', endpoint),
        5000,
      ),
    )
    expect(message).toBe(
      `the BLOB store is not usable: COFFER_S3_ENDPOINT ${endpoint} could not be reached (ECONNREFUSED)`,
    )
    expect(performance.now() - started).toBeLessThan(5000)
  })
})

it('says when no credentials are found at all', async () => {
  const store = new S3BlobStore({
    endpoint: 'http://127.0.0.1:1',
    bucket: 'b12',
    region: 'us-east-1',
  })
  const env = { ...process.env }
  for (const k of Object.keys(process.env)) if (k.startsWith('AWS_')) delete process.env[k]
  process.env.AWS_SHARED_CREDENTIALS_FILE = '/nonexistent/credentials'
  process.env.AWS_CONFIG_FILE = '/nonexistent/config'
  process.env.AWS_EC2_METADATA_DISABLED = 'true'
  try {
    const message = await failure(
      checkBlobStoreAtStart(store, s3Target('b12', 'http://127.0.0.1:1'), 5000),
    )
    expect(message).toMatch(
      /no S3 credentials were found: set COFFER_S3_ACCESS_KEY_ID and COFFER_S3_SECRET_ACCESS_KEY/,
    )
  } finally {
    process.env = env
    store.close()
  }
})

describe('the start-up check is bounded by COFFER_BLOB_CHECK_TIMEOUT_MS', () => {
  let silent: Server
  const sockets: Socket[] = []
  beforeAll(async () => {
    // Accepts connections and never answers: a firewall that drops, a hung proxy.
    silent = createServer((socket) => sockets.push(socket))
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r))
  })
  afterAll(async () => {
    for (const s of sockets) s.destroy()
    await new Promise((r) => silent.close(r))
  })

  it('gives up on an endpoint that never answers at the bound, not later', async () => {
    const address = silent.address()
    if (!address || typeof address === 'string') throw new Error('no port')
    const endpoint = `http://127.0.0.1:${address.port}`
    const store = new S3BlobStore({
      endpoint,
      bucket: 'b12',
      region: 'us-east-1',
      forcePathStyle: true,
      accessKeyId: 'S3RVER',
      secretAccessKey: 'S3RVER',
    })
    const started = performance.now()
    const message = await failure(checkBlobStoreAtStart(store, s3Target('b12', endpoint), 300))
    const took = performance.now() - started
    store.close()
    expect(message).toBe(
      `the BLOB store is not usable: COFFER_S3_ENDPOINT ${endpoint} did not answer within 300 ms (COFFER_BLOB_CHECK_TIMEOUT_MS)`,
    )
    expect(took).toBeGreaterThanOrEqual(295)
    expect(took).toBeLessThan(1500)
  })

  it('waits up to the bound: an answer just inside it passes, one past it fails', async () => {
    const target = s3Target('b12', 'http://127.0.0.1:1')
    await checkBlobStoreAtStart(slowStore(50), target, 200)
    const message = await failure(checkBlobStoreAtStart(slowStore(400), target, 200))
    expect(message).toMatch(/did not answer within 200 ms \(COFFER_BLOB_CHECK_TIMEOUT_MS\)$/)
    await failure(checkBlobStoreAtStart(slowStore(Number.POSITIVE_INFINITY), target, 100))
  })
})

async function unusedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const address = server.address()
  await new Promise((r) => server.close(r))
  if (!address || typeof address === 'string') throw new Error('no port')
  return address.port
}
