import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps, type Deps } from '../../src/deps.js'
import { ManualClock } from '../../src/lib/clock.js'
import { QUOTA_CACHE_MS } from '../../src/modules/metering/metering.service.js'
import { openStore, type Store } from '../../src/store/db.js'
import {
  Api,
  buildTestApp,
  errorOf,
  NO_PROVIDERS,
  TEST_ARGON2,
  TEST_HASHING_LIMITS,
  type TestApp,
} from '../helpers/app.js'
import { assertDescribed, type ResponseWatch, watchResponses } from '../helpers/openapi-harness.js'
import { openTestSqliteStore, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Two nodes on one database (issue 13, part 3): each with its own connections, services and
 * group commit, as two `coffer serve` processes behind a load balancer. Counts made on both add
 * up exactly in the one table, and the daily quota set through one holds on the other.
 */
const DAY = '2030-05-05'
const clock = new ManualClock(`${DAY}T08:00:00.000Z`)
const masterKey = MasterKey.generate()
const folder = mkdtempSync(join(tmpdir(), 'coffer-metering-nodes-'))

let a: TestApp
let b: {
  app: FastifyInstance
  api: Api
  responses: ResponseWatch
  store: Store
  deps: Deps
}

async function secondNode(first: TestApp) {
  const store =
    testDialect === 'postgres'
      ? openStore({
          url: TEST_PG_URL,
          pgSchema: (
            await sql<{ s: string }>`select current_schema() as s`.execute(first.deps.store.db)
          ).rows[0]?.s as string,
          pg: { poolSize: 4 },
        })
      : openTestSqliteStore(join(folder, 'coffer.db'))
  const deps = createDeps(store, {
    masterKey,
    blobStore: new FsBlobStore(join(folder, 'blobs')),
    argon2: TEST_ARGON2,
    hashingLimits: TEST_HASHING_LIMITS,
    loginRefusalDelayMs: 0,
    clock,
    providers: NO_PROVIDERS,
  })
  const app = await buildApp(deps, {})
  const responses = watchResponses(app)
  await app.ready()
  return { app, api: new Api(app, responses), responses, store, deps }
}

beforeAll(async () => {
  a = await buildTestApp({
    clock,
    masterKey,
    ...(testDialect === 'sqlite' ? { sqliteFile: join(folder, 'coffer.db') } : {}),
  })
  b = await secondNode(a)
})
afterAll(async () => {
  await b?.app.close()
  await b?.store.close()
  await a?.close()
  rmSync(folder, { recursive: true, force: true })
  if (b) assertDescribed(b.responses)
})

async function vaultWithDocs(n: number) {
  const auth = a.admin.api_key
  const vault = (
    await a.api.post('/v1/vaults', { auth, form: { name: `v-${Math.random()}` } })
  ).json().vault.id as string
  const docs: string[] = []
  for (let i = 0; i < n; i++) {
    const res = await a.api.post(`/v2/vaults/${vault}/documents`, {
      auth,
      json: { document: { i } },
    })
    docs.push(res.json().document.id as string)
  }
  return { vault, docs }
}

const usageOn = async (api: Api) => {
  const res = await api.get(`/v1/accounts/${a.admin.account_id}/usage`, {
    auth: a.admin.api_key,
    query: { from: DAY, to: DAY },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().usage.totals as Record<string, number>
}

describe(`metering across two nodes on one database (${testDialect})`, () => {
  it('parallel reads on both nodes add up exactly', async () => {
    const { vault, docs } = await vaultWithDocs(3)
    const before = await usageOn(a.api)
    const url = `/v2/vaults/${vault}/documents/${docs.join(',')}`
    const auth = a.admin.api_key
    const answers = await Promise.all(
      Array.from({ length: 80 }, (_, i) => (i % 2 === 0 ? a.api : b.api).get(url, { auth })),
    )
    for (const res of answers) expect(res.statusCode, res.body).toBe(200)
    // Each node stores its counts within COUNT_FLUSH_MS; here at once.
    await Promise.all([a.deps.metering.flush(), b.deps.metering.flush()])
    const onA = await usageOn(a.api)
    const onB = await usageOn(b.api)
    expect(onB).toEqual(onA)
    expect((onA.document_read ?? 0) - (before.document_read ?? 0)).toBe(240)
  })

  it('a quota set through one node holds on the other', async () => {
    const { vault, docs } = await vaultWithDocs(1)
    const used = (await usageOn(a.api)).document_read ?? 0
    const put = await a.api.put(`/v1/accounts/${a.admin.account_id}/settings`, {
      auth: a.admin.api_key,
      json: { daily_operations_quota: used + 2 },
    })
    expect(put.statusCode, put.body).toBe(200)
    // B read the account's quota (none) during the last test: it holds that at most
    // QUOTA_CACHE_MS before reading the setting again.
    await new Promise((r) => setTimeout(r, QUOTA_CACHE_MS + 50))
    const read = (api: Api) =>
      api.get(`/v2/vaults/${vault}/documents/${docs[0]}`, { auth: a.admin.api_key })
    expect((await read(a.api)).statusCode).toBe(200)
    // B sees A's count once A stored it (within COUNT_FLUSH_MS; here at once).
    await a.deps.metering.flush()
    expect((await read(b.api)).statusCode).toBe(200)
    await b.deps.metering.flush()
    const refused = await read(b.api)
    expect(refused.statusCode, refused.body).toBe(429)
    expect(errorOf(refused).code).toBe('OPERATIONS_QUOTA_EXCEEDED')
    expect((await read(a.api)).statusCode).toBe(429)
  })
})
