import { mkdtempSync, rmSync } from 'node:fs'
import { type AddressInfo, createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { afterAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import type { BlobStore } from '../../src/blob/blob-store.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { S3BlobStore } from '../../src/blob/s3-blob-store.js'
import { buildConsentApp } from '../../src/consent-app.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps, type Deps } from '../../src/deps.js'
import { openStore, type Store } from '../../src/store/db.js'
import { TEST_ARGON2 } from '../helpers/app.js'
import { TEST_CONSENT_SECRET } from '../helpers/consent.js'
import { startS3Server } from '../helpers/s3.js'
import { openTestStore, testDialect } from '../helpers/store.js'

interface Pair {
  deps: Deps
  main: FastifyInstance
  consent: FastifyInstance
  lines: string[]
  close(): Promise<void>
}

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-health-'))
  dirs.push(dir)
  return dir
}

/** Both listeners' apps on one store and BLOB store, logging at info into `lines`. */
async function buildPair(
  store: Store,
  blobStore: BlobStore = new FsBlobStore(freshDir()),
  consentLimit = 120,
): Promise<Pair> {
  const lines: string[] = []
  const stream = { write: (line: string) => void lines.push(line) }
  const deps = createDeps(store, {
    masterKey: MasterKey.generate(),
    blobStore,
    argon2: TEST_ARGON2,
    readyTimeoutMs: 1000,
    consent: {
      secret: TEST_CONSENT_SECRET,
      production: false,
      storefrontSecret: undefined,
      maxSkewSeconds: 90,
    },
  })
  const main = await buildApp(deps, { logger: { level: 'info', stream } })
  const consent = await buildConsentApp(deps, {
    loggerInstance: main.log,
    rateLimit: { perAddress: consentLimit, perShop: consentLimit, windowSeconds: 60 },
  })
  await main.ready()
  await consent.ready()
  return {
    deps,
    main,
    consent,
    lines,
    close: async () => {
      await main.close()
      await consent.close()
    },
  }
}

describe('GET /healthz and /readyz on both listeners', () => {
  it('answer 200 when the node can serve: the envelope on the main API, plain JSON on consent', async () => {
    const store = await openTestStore()
    const pair = await buildPair(store)
    try {
      const live = await pair.main.inject({ method: 'GET', url: '/healthz' })
      expect(live.statusCode).toBe(200)
      expect(live.json()).toMatchObject({ result: 'success', status: 'ok' })
      expect(typeof live.json().transaction_id).toBe('string')
      const ready = await pair.main.inject({ method: 'GET', url: '/readyz' })
      expect(ready.statusCode).toBe(200)
      expect(ready.json()).toMatchObject({ result: 'success', status: 'ready' })

      const consentLive = await pair.consent.inject({ method: 'GET', url: '/healthz' })
      expect(consentLive.statusCode).toBe(200)
      expect(consentLive.json()).toEqual({ status: 'ok' })
      const consentReady = await pair.consent.inject({ method: 'GET', url: '/readyz' })
      expect(consentReady.statusCode).toBe(200)
      expect(consentReady.json()).toEqual({ status: 'ready' })
    } finally {
      await pair.close()
      await store.close()
    }
  })

  it('are not logged at info and not counted by the consent rate limits', async () => {
    const store = await openTestStore()
    const pair = await buildPair(store, undefined, 3)
    try {
      for (let i = 0; i < 10; i++) {
        for (const url of ['/healthz', '/readyz']) {
          const res = await pair.consent.inject({ method: 'GET', url })
          expect(res.statusCode, `${url} #${i}`).toBe(200)
          expect((await pair.main.inject({ method: 'GET', url })).statusCode).toBe(200)
        }
      }
      expect(pair.lines.filter((l) => /healthz|readyz/.test(l))).toEqual([])
      // The limit itself still holds for the consent routes (3 per window here).
      const statuses: number[] = []
      for (let i = 0; i < 4; i++) {
        statuses.push((await pair.consent.inject({ method: 'GET', url: '/nope' })).statusCode)
      }
      expect(statuses).toEqual([404, 404, 404, 429])
    } finally {
      await pair.close()
      await store.close()
    }
  })

  it('/readyz answers 503 naming the database when it is unreachable; /healthz stays 200', async () => {
    const store = await openTestStore()
    const pair = await buildPair(store)
    try {
      expect((await pair.main.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200)
      await store.close()
      for (const app of [pair.main, pair.consent]) {
        const res = await app.inject({ method: 'GET', url: '/readyz' })
        expect(res.statusCode).toBe(503)
        expect(res.headers['retry-after']).toBe('1')
        const message = app === pair.main ? res.json().error.message : res.json().error
        expect(message).toMatch(/^Not ready: .*database/)
        expect(message).not.toMatch(/blob_store/)
        expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
      }
      const main = (await pair.main.inject({ method: 'GET', url: '/readyz' })).json()
      expect(main).toMatchObject({
        result: 'error',
        error: { type: 'service_unavailable', code: 'NOT_READY' },
      })
    } finally {
      await pair.close()
    }
  })

  it.runIf(testDialect === 'postgres')(
    '/readyz answers 503 within its bound when the PostgreSQL server is gone',
    async () => {
      // Nothing listens on port 9: every connection attempt of this pool is refused.
      const store = openStore({
        url: 'postgres://postgres@127.0.0.1:9/postgres',
        pg: { poolSize: 2 },
      })
      const pair = await buildPair(store)
      try {
        const started = Date.now()
        const res = await pair.main.inject({ method: 'GET', url: '/readyz' })
        expect(res.statusCode).toBe(503)
        expect(res.json().error.message).toBe('Not ready: database, migrations')
        expect(Date.now() - started).toBeLessThan(3000)
      } finally {
        await pair.close()
        await store.close()
      }
    },
  )

  it('/readyz answers 503 naming the BLOB store when the S3 stand-in is stopped', async () => {
    const s3 = await startS3Server()
    const blobs = new S3BlobStore({
      endpoint: s3.endpoint,
      region: s3.region,
      bucket: s3.bucket,
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
      forcePathStyle: true,
      prefix: '',
    })
    const store = await openTestStore()
    const pair = await buildPair(store, blobs)
    try {
      expect((await pair.main.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200)
      await s3.close()
      for (const app of [pair.main, pair.consent]) {
        const res = await app.inject({ method: 'GET', url: '/readyz' })
        expect(res.statusCode).toBe(503)
        const message = app === pair.main ? res.json().error.message : res.json().error
        expect(message).toBe('Not ready: blob_store')
      }
    } finally {
      blobs.close()
      await pair.close()
      await store.close()
    }
  })

  it('/readyz answers within its bound (COFFER_READY_TIMEOUT_MS) when the BLOB store hangs', async () => {
    // An "S3" that accepts connections and never answers.
    const held: Socket[] = []
    const hung = createServer((socket) => void held.push(socket))
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r))
    const blobs = new S3BlobStore({
      endpoint: `http://127.0.0.1:${(hung.address() as AddressInfo).port}`,
      region: 'us-east-1',
      bucket: 'hung',
      accessKeyId: 'x',
      secretAccessKey: 'x',
      forcePathStyle: true,
    })
    const store = await openTestStore()
    const pair = await buildPair(store, blobs)
    try {
      const started = performance.now()
      const res = await pair.main.inject({ method: 'GET', url: '/readyz' })
      const ms = performance.now() - started
      expect(res.statusCode).toBe(503)
      expect(res.json().error.message).toBe('Not ready: blob_store')
      // The bound here is 1000 ms (buildPair): answered once it passes, not before.
      expect(ms).toBeGreaterThanOrEqual(990)
      expect(ms).toBeLessThan(2500)
    } finally {
      blobs.close()
      for (const s of held) s.destroy()
      hung.close()
      await pair.close()
      await store.close()
    }
  })

  it('/readyz answers 503 naming the BLOB store when its folder cannot be written', async () => {
    const root = join(freshDir(), 'file-not-folder')
    const { writeFileSync } = await import('node:fs')
    writeFileSync(root, 'x')
    const store = await openTestStore()
    const pair = await buildPair(store, new FsBlobStore(root))
    try {
      const res = await pair.main.inject({ method: 'GET', url: '/readyz' })
      expect(res.statusCode).toBe(503)
      expect(res.json().error.message).toBe('Not ready: blob_store')
    } finally {
      await pair.close()
      await store.close()
    }
  })

  it('/readyz answers 503 naming migrations when one is not applied', async () => {
    const store = await openTestStore()
    const pair = await buildPair(store)
    try {
      const { sql } = await import('kysely')
      await sql`delete from kysely_migration where name = (select max(name) from kysely_migration)`.execute(
        store.db,
      )
      const res = await pair.main.inject({ method: 'GET', url: '/readyz' })
      expect(res.statusCode).toBe(503)
      expect(res.json().error.message).toBe('Not ready: migrations')
    } finally {
      await pair.close()
      await store.close()
    }
  })
})
