import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { verifyChains } from '../../src/audit/verify.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps } from '../../src/deps.js'
import { openStore, type Store } from '../../src/store/db.js'
import {
  Api,
  buildTestApp,
  NO_PROVIDERS,
  TEST_ARGON2,
  TEST_HASHING_LIMITS,
  type TestApp,
} from '../helpers/app.js'
import { assertDescribed, type ResponseWatch, watchResponses } from '../helpers/openapi-harness.js'
import { openTestSqliteStore, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Two nodes on one database (issue 13, part 1): each appends to the same account's chain
 * through its own group commit and its own write transactions, at once; the chain stays whole
 * (one event per request, numbered without gaps, every link right).
 */
const masterKey = MasterKey.generate()
const folder = mkdtempSync(join(tmpdir(), 'coffer-audit-nodes-'))

let a: TestApp
let b: { app: FastifyInstance; api: Api; responses: ResponseWatch; store: Store }

beforeAll(async () => {
  a = await buildTestApp({
    masterKey,
    ...(testDialect === 'sqlite' ? { sqliteFile: join(folder, 'coffer.db') } : {}),
  })
  const store =
    testDialect === 'postgres'
      ? openStore({
          url: TEST_PG_URL,
          pgSchema: (
            await sql<{ s: string }>`select current_schema() as s`.execute(a.deps.store.db)
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
    providers: NO_PROVIDERS,
  })
  const app = await buildApp(deps, {})
  const responses = watchResponses(app)
  await app.ready()
  b = { app, api: new Api(app, responses), responses, store }
})
afterAll(async () => {
  await b?.app.close()
  await b?.store.close()
  await a?.close()
  rmSync(folder, { recursive: true, force: true })
  if (b) assertDescribed(b.responses)
})

describe(`the chain under concurrent appends from two nodes (${testDialect})`, () => {
  it('reads, writes and refusals on both nodes at once: one event each, and the chain verifies', async () => {
    const admin = await a.newAccount()
    const auth = admin.api_key
    const vault = (await a.api.post('/v1/vaults', { auth, form: { name: 'v' } })).json().vault
      .id as string
    const count = async () =>
      Number(
        (
          await a.deps.store.db
            .selectFrom('audit_events')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('account_id', '=', admin.account_id)
            .executeTakeFirstOrThrow()
        ).n,
      )
    const before = await count()
    const calls = Array.from({ length: 120 }, (_, i) => {
      const api = i % 2 === 0 ? a.api : b.api
      if (i % 3 === 0)
        return api.post(`/v2/vaults/${vault}/documents`, { auth, json: { document: { i } } })
      if (i % 3 === 1) return api.get(`/v1/vaults/${vault}`, { auth })
      return api.get(`/v1/vaults/${vault}/documents/01a00000-0000-7000-8000-00000000000${i % 10}`, {
        auth,
      })
    })
    const answers = await Promise.all(calls)
    for (const [i, res] of answers.entries())
      expect(res.statusCode, res.body).toBe(i % 3 === 2 ? 404 : 200)
    expect((await count()) - before).toBe(120)
    const report = await verifyChains(a.deps.store.db, admin.account_id)
    expect(report.problems).toEqual([])
  })
})
