/**
 * A server for the bench, in its own process so the load generator never shares its event loop
 * (and so its memory can be read from /proc on its own).
 * Usage: node --import tsx bench/server-child.ts <bare|coffer|s3|search|consent>
 * Prints one JSON line (ServerInfo) on stdout once listening, then serves until SIGTERM/SIGINT or
 * until its stdin closes (the parent died).
 */
import { randomBytes } from 'node:crypto'
import { statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import { buildApp } from '../src/app.js'
import type { BlobStore } from '../src/blob/blob-store.js'
import { FsBlobStore } from '../src/blob/fs-blob-store.js'
import { S3BlobStore } from '../src/blob/s3-blob-store.js'
import { buildConsentApp } from '../src/consent-app.js'
import { MasterKey } from '../src/crypto/master-key.js'
import { createDeps } from '../src/deps.js'
import { openStore, type Store } from '../src/store/db.js'
import { migrateToLatest } from '../src/store/migrate.js'
import { ENV, S3RVER_CREDENTIALS, type ServerInfo } from './protocol.js'
import {
  createSearchTarget,
  explainQueries,
  measureStorage,
  populate,
  verifySamples,
} from './search-data.js'
import { searchQueries } from './search-queries.js'

const HOST = '127.0.0.1'
/** Documents in the read vault: more than one list page of 100. */
const DOCUMENT_COUNT = 120
/** Consumers the consent update scenario spreads its writes over (one row would be a hot lock). */
const CONSENT_CONSUMERS = 200

interface Running {
  info: ServerInfo
  /** Stops serving and releases everything (the process exits right after). */
  close(): Promise<void>
}

function portOf(app: FastifyInstance): number {
  const address = app.server.address()
  if (!address || typeof address === 'string') throw new Error('server has no TCP address')
  return address.port
}

function required(name: string): string {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is required`)
  return value
}

async function startBare(): Promise<Running> {
  const app = Fastify({ logger: false })
  app.get('/', async () => ({ hello: 'world' }))
  await app.listen({ host: HOST, port: 0 })
  return { info: { kind: 'bare', port: portOf(app) }, close: () => app.close() }
}

/** A fresh, migrated store: a SQLite file in the parent's temp dir, or a PostgreSQL schema. */
async function openBenchStore(): Promise<Store> {
  const pgUrl = process.env[ENV.pgUrl]
  const store = pgUrl
    ? openStore({ url: pgUrl, pgSchema: required(ENV.pgSchema) })
    : openStore({
        url: join(required(ENV.dataDir), 'coffer.db'),
        // Encrypted as `coffer serve` encrypts it (issue 22), unless the crypt pair's "off" half.
        ...(process.env[ENV.sqliteEncryption] === 'off' ? {} : { sqliteKey: randomBytes(32) }),
        // The same setting as `coffer serve` (0: searches inline, the stall baseline).
        ...(process.env.COFFER_SEARCH_WORKERS
          ? { sqliteReadWorkers: Number(process.env.COFFER_SEARCH_WORKERS) }
          : {}),
      })
  await migrateToLatest(store.db)
  return store
}

/** Files under the parent's temp dir, or the s3rver child's bucket when the parent names one. */
function openBlobStore(): BlobStore {
  const endpoint = process.env[ENV.s3Endpoint]
  if (endpoint) {
    return new S3BlobStore({
      endpoint,
      bucket: required(ENV.s3Bucket),
      region: 'us-east-1',
      forcePathStyle: true,
      ...S3RVER_CREDENTIALS,
    })
  }
  return new FsBlobStore(
    join(process.env[ENV.dataDir] ?? tmpdir(), `coffer-bench-blobs-${process.pid}`),
  )
}

/** Fixtures through the public API (app.inject, before listening): what a client would do. */
async function createFixtures(app: FastifyInstance, adminApiKey: string) {
  const authorization = `Basic ${Buffer.from(`${adminApiKey}:`).toString('base64')}`
  const call = async (method: 'POST' | 'GET', url: string, payload?: object) => {
    const res = await app.inject({ method, url, headers: { authorization }, payload })
    if (res.statusCode < 200 || res.statusCode >= 300) {
      throw new Error(`fixture ${method} ${url}: HTTP ${res.statusCode}: ${res.body.slice(0, 300)}`)
    }
    return res.json() as Record<string, unknown>
  }
  const vault = async (name: string) =>
    ((await call('POST', '/v1/vaults', { name })).vault as { id: string }).id
  const vaultId = await vault('bench-reads')
  const writeVaultId = await vault('bench-writes')
  const documentIds: string[] = []
  for (let i = 0; i < DOCUMENT_COUNT; i++) {
    const created = await call('POST', `/v2/vaults/${vaultId}/documents`, {
      document: {
        name: `Bench Person ${i}`,
        email: `person${i}@example.com`,
        age: 20 + (i % 50),
        tags: ['bench', `n${i % 7}`],
      },
    })
    documentIds.push(created.document_id as string)
  }
  const documentId = documentIds[Math.floor(DOCUMENT_COUNT / 2)] as string
  return { vaultId, writeVaultId, documentId, documentCount: DOCUMENT_COUNT }
}

async function startCoffer(): Promise<Running> {
  const store = await openBenchStore()
  const blobStore = openBlobStore()
  // Production argon2 parameters (the default): login is meant to be measured as deployed.
  // The login-flood bench may lift the login limits to load argon2 with every request.
  const unlimited = { max: 1_000_000_000, windowMs: 60_000 }
  const deps = createDeps(store, {
    masterKey: MasterKey.generate(),
    blobStore,
    ...(process.env[ENV.loginLimits] === 'off'
      ? { loginLimits: { perAddress: unlimited, global: unlimited } }
      : {}),
    // The audit on/off pair (BENCH_PARTS `audit`): off only here, never in production.
    ...(process.env[ENV.audit] === 'off' ? { audit: false } : {}),
  })
  const admin = await deps.accounts.createWithAdmin()
  const adminRow = await deps.users.findForLogin(admin.account_id, admin.username)
  if (!adminRow) throw new Error('the admin user was not created')
  const loginUser = { username: 'bench-login', password: randomBytes(12).toString('hex') }
  const created = await deps.users.create(admin.account_id, { ...loginUser, groupIds: [] })

  // The login-flood bench plays a proxy on loopback that names many clients in X-Forwarded-For.
  const app = await buildApp(deps, { logger: false, trustProxy: ['loopback'] })
  const fixtures = await createFixtures(app, admin.api_key)
  await app.listen({ host: HOST, port: 0 })
  return {
    info: {
      kind: 'coffer',
      port: portOf(app),
      dialect: store.dialect,
      blobStore: blobStore instanceof S3BlobStore ? 's3' : 'fs',
      accountId: admin.account_id,
      adminApiKey: admin.api_key,
      adminUserId: adminRow.id,
      loginUser: { id: created.row.id, ...loginUser },
      ...fixtures,
    },
    close: async () => {
      try {
        await app.close()
        await store.close()
      } finally {
        if (blobStore instanceof S3BlobStore) blobStore.close()
      }
    },
  }
}

/** Bytes of a file, 0 when it does not exist. */
function fileBytes(file: string): number {
  try {
    return statSync(file).size
  } catch {
    return 0
  }
}

/**
 * Coffer with one vault of COFFER_BENCH_SEARCH_DOCUMENTS documents under one schema, written
 * straight to the database before listening (bench/search-data.ts), its queries explained.
 */
async function startSearch(): Promise<Running> {
  const n = Number(required(ENV.searchDocuments))
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${ENV.searchDocuments} must be >= 1`)
  const store = await openBenchStore()
  const blobStore = openBlobStore()
  const deps = createDeps(store, { masterKey: MasterKey.generate(), blobStore })
  const admin = await deps.accounts.createWithAdmin()
  const app = await buildApp(deps, { logger: false })
  const log = (line: string) => process.stderr.write(`${line}\n`)
  // The second vault first, so the measured one's rows are the newer ones in every index.
  const second = Number(process.env[ENV.searchSecondVault] ?? 0)
  if (!Number.isSafeInteger(second) || second < 0)
    throw new Error(`${ENV.searchSecondVault} must be >= 0`)
  if (second > 0) {
    const beside = await createSearchTarget(
      app,
      store.db,
      admin.api_key,
      admin.account_id,
      'bench-beside',
    )
    await populate(store.db, store.dialect, deps.keyring, beside, second, log)
  }
  const target = await createSearchTarget(app, store.db, admin.api_key, admin.account_id)
  const populated = await populate(store.db, store.dialect, deps.keyring, target, n, log)
  await verifySamples(app, store.db, admin.api_key, target, populated)
  const file = join(process.env[ENV.dataDir] ?? '', 'coffer.db')
  const storage = await measureStorage(
    store.db,
    store.dialect,
    () => fileBytes(file) + fileBytes(`${file}-wal`),
  )
  const plans = await explainQueries(
    store.db,
    store.dialect,
    target,
    searchQueries(target.schemaId, populated.controlName),
  )
  await app.listen({ host: HOST, port: 0 })
  return {
    info: {
      kind: 'search',
      port: portOf(app),
      dialect: store.dialect,
      adminApiKey: admin.api_key,
      ownerApiKey: target.owner.apiKey,
      secondVaultDocuments: second,
      vaultId: target.vaultId,
      schemaId: target.schemaId,
      controlName: populated.controlName,
      population: populated.population,
      storage,
      plans,
    },
    close: async () => {
      await app.close()
      await store.close()
    },
  }
}

/**
 * The consent API as `coffer serve` runs it (its own Fastify app, production argon2 irrelevant),
 * with CONSENT_CONSUMERS email consumers' records created through the API before listening.
 */
async function startConsent(): Promise<Running> {
  const store = await openBenchStore()
  const deps = createDeps(store, {
    masterKey: MasterKey.generate(),
    blobStore: openBlobStore(),
    consent: {
      secret: randomBytes(32).toString('base64url'),
      production: false,
      storefrontSecret: undefined,
      maxSkewSeconds: 90,
    },
  })
  const app = await buildConsentApp(deps, { logger: false })
  const pathFor = (i: number) =>
    `/api/v1/cmp/consent?${new URLSearchParams({
      provider: 'email',
      shop: 'bench-shop.example',
      privacy_center_id: 'bench-pc',
      customer_email: `bench.consumer.${i}@example.com`,
      client_id: '3b241101-e2bb-4255-8caf-4136c566a962',
    })}`
  const jwts: string[] = []
  for (let i = 0; i < CONSENT_CONSUMERS; i++) {
    const created = await app.inject({ method: 'GET', url: pathFor(i) })
    if (created.statusCode !== 200) {
      throw new Error(`consent fixture: HTTP ${created.statusCode}: ${created.body.slice(0, 300)}`)
    }
    jwts.push((created.json() as { jwt: string }).jwt)
  }
  await app.listen({ host: HOST, port: 0 })
  return {
    info: {
      kind: 'consent',
      port: portOf(app),
      dialect: store.dialect,
      readPath: pathFor(0),
      jwts,
    },
    close: async () => {
      await app.close()
      await store.close()
    },
  }
}

/** s3rver with one empty bucket, storing into the parent's temp dir (the parent removes it). */
async function startS3(): Promise<Running> {
  // Loaded only here: the Coffer children never carry s3rver in their memory.
  const { default: S3rver } = await import('s3rver')
  const bucket = 'coffer-bench'
  const server = new S3rver({
    address: HOST,
    port: 0,
    silent: true,
    directory: required(ENV.dataDir),
    configureBuckets: [{ name: bucket, configs: [] }],
  })
  const { port } = await server.run()
  return { info: { kind: 's3', port, bucket }, close: () => server.close() }
}

async function main(kind: string | undefined): Promise<void> {
  const start = {
    bare: startBare,
    coffer: startCoffer,
    s3: startS3,
    search: startSearch,
    consent: startConsent,
  }[kind ?? '']
  if (kind === undefined || start === undefined) {
    throw new Error(
      `usage: server-child.ts <bare|coffer|s3|search|consent> (got ${kind ?? 'nothing'})`,
    )
  }
  const running = await start()
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    try {
      await running.close()
    } finally {
      process.exit(0)
    }
  }
  process.once('SIGTERM', () => void stop())
  process.once('SIGINT', () => void stop())
  // The parent holds our stdin open; when it goes away (even by SIGKILL), so do we.
  process.stdin.on('end', () => void stop())
  process.stdin.on('error', () => void stop())
  process.stdin.resume()
  process.stdout.write(`${JSON.stringify(running.info)}\n`)
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  return error.cause === undefined
    ? (error.stack ?? error.message)
    : `${error.stack ?? error.message}\ncaused by: ${describe(error.cause)}`
}

main(process.argv[2]).catch((error: unknown) => {
  process.stderr.write(`bench server: ${describe(error)}\n`)
  process.exit(1)
})
