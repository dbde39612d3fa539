/**
 * A server for the bench, in its own process so the load generator never shares its event loop.
 * Usage: node --import tsx bench/server-child.ts <bare|coffer>
 * Prints one JSON line (ServerInfo) on stdout once listening, then serves until SIGTERM/SIGINT or
 * until its stdin closes (the parent died).
 */
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import { buildApp } from '../src/app.js'
import { FsBlobStore } from '../src/blob/fs-blob-store.js'
import { MasterKey } from '../src/crypto/master-key.js'
import { createDeps } from '../src/deps.js'
import { openStore, type Store } from '../src/store/db.js'
import { migrateToLatest } from '../src/store/migrate.js'
import { ENV, type ServerInfo } from './protocol.js'

const HOST = '127.0.0.1'

interface Running {
  app: FastifyInstance
  info: ServerInfo
  store?: Store
}

function portOf(app: FastifyInstance): number {
  const address = app.server.address()
  if (!address || typeof address === 'string') throw new Error('server has no TCP address')
  return address.port
}

async function startBare(): Promise<Running> {
  const app = Fastify({ logger: false })
  app.get('/', async () => ({ hello: 'world' }))
  await app.listen({ host: HOST, port: 0 })
  return { app, info: { kind: 'bare', port: portOf(app) } }
}

/** A fresh, migrated store: a SQLite file in the parent's temp dir, or a PostgreSQL schema. */
async function openBenchStore(): Promise<Store> {
  const pgUrl = process.env[ENV.pgUrl]
  if (pgUrl) {
    const pgSchema = process.env[ENV.pgSchema]
    if (!pgSchema) throw new Error(`${ENV.pgSchema} is required with ${ENV.pgUrl}`)
    const store = openStore({ url: pgUrl, pgSchema })
    await migrateToLatest(store.db)
    return store
  }
  const dataDir = process.env[ENV.dataDir]
  if (!dataDir) throw new Error(`${ENV.dataDir} is required`)
  const store = openStore({ url: join(dataDir, 'coffer.db') })
  await migrateToLatest(store.db)
  return store
}

async function startCoffer(): Promise<Running> {
  const store = await openBenchStore()
  // Production argon2 parameters (the default): login is meant to be measured as deployed.
  const blobDir = join(process.env[ENV.dataDir] ?? tmpdir(), `coffer-bench-blobs-${process.pid}`)
  const deps = createDeps(store, {
    masterKey: MasterKey.generate(),
    blobStore: new FsBlobStore(blobDir),
  })
  const admin = await deps.accounts.createWithAdmin()
  const adminRow = await deps.users.findForLogin(admin.account_id, admin.username)
  if (!adminRow) throw new Error('the admin user was not created')
  const loginUser = { username: 'bench-login', password: randomBytes(12).toString('hex') }
  const created = await deps.users.create(admin.account_id, { ...loginUser, groupIds: [] })

  const app = await buildApp(deps, { logger: false })
  await app.listen({ host: HOST, port: 0 })
  return {
    app,
    store,
    info: {
      kind: 'coffer',
      port: portOf(app),
      dialect: store.dialect,
      accountId: admin.account_id,
      adminApiKey: admin.api_key,
      adminUserId: adminRow.id,
      loginUser: { id: created.row.id, ...loginUser },
    },
  }
}

async function main(kind: string | undefined): Promise<void> {
  if (kind !== 'bare' && kind !== 'coffer') {
    throw new Error(`usage: server-child.ts <bare|coffer> (got ${kind ?? 'nothing'})`)
  }
  const running = kind === 'bare' ? await startBare() : await startCoffer()
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    try {
      await running.app.close()
      await running.store?.close()
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
