import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps } from '../../src/deps.js'
import { ManualClock } from '../../src/lib/clock.js'
import { openStore, type Store } from '../../src/store/db.js'
import {
  Api,
  buildTestApp,
  createUser,
  errorOf,
  NO_PROVIDERS,
  TEST_ARGON2,
  TEST_HASHING_LIMITS,
  type TestApp,
} from '../helpers/app.js'
import { assertDescribed, type ResponseWatch, watchResponses } from '../helpers/openapi-harness.js'
import { notificationsDelivered } from '../helpers/rights.js'
import { openTestSqliteStore, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Two nodes on one database (issue 13, part 2): each has its own connections and its own
 * per-node caches (the credential directory's), as two `coffer serve` processes behind a load
 * balancer do. A settings change made through one is honoured by the other at once: the
 * settings are read from the database where they apply (the credential query joins the token
 * cap; login and password changes read the row), never cached per node.
 */
const START = '2030-01-01T00:00:00.000Z'
const HOUR = 3_600_000
const PASSWORD = 'two nodes one db 1'
const clock = new ManualClock(START)
const masterKey = MasterKey.generate()
const folder = mkdtempSync(join(tmpdir(), 'coffer-settings-nodes-'))

let a: TestApp
let b: { app: FastifyInstance; api: Api; responses: ResponseWatch; store: Store }

/** A second node: its own store (pool or SQLite connection), services and app. */
async function secondNode(first: TestApp) {
  const store =
    testDialect === 'postgres'
      ? openStore({
          url: TEST_PG_URL,
          pgSchema: (
            await sql<{ s: string }>`select current_schema() as s`.execute(first.deps.store.db)
          ).rows[0]?.s as string,
          pg: { poolSize: 2 },
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
  return { app, api: new Api(app, responses), responses, store }
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
beforeEach(async () => {
  clock.set(START)
  const res = await a.api.put(`/v1/accounts/${a.admin.account_id}/settings`, {
    auth: a.admin.api_key,
    json: {
      max_access_token_duration_seconds: null,
      require_mfa: false,
      password_min_length: 8,
      session_revocation_on_password_change: true,
    },
  })
  expect(res.statusCode, res.body).toBe(200)
})

const setOnA = async (json: Record<string, unknown>) => {
  const res = await a.api.put(`/v1/accounts/${a.admin.account_id}/settings`, {
    auth: a.admin.api_key,
    json,
  })
  expect(res.statusCode, res.body).toBe(200)
  // PostgreSQL: B drops its cached credentials when A's change notification arrives (issue 21).
  await notificationsDelivered(a.deps.store, b.store)
}
const loginOnB = (username: string) =>
  b.api.post('/v1/auth/login', {
    form: { account_id: a.admin.account_id, username, password: PASSWORD },
  })
const worksOnB = async (credential: string) =>
  (await b.api.get('/v1/auth/me', { auth: credential })).statusCode === 200

describe(`settings changed on one node hold on another (${testDialect})`, () => {
  it('node B reads the settings node A wrote', async () => {
    await setOnA({ password_min_length: 10 })
    const res = await b.api.get(`/v1/accounts/${a.admin.account_id}/settings`, {
      auth: a.admin.api_key,
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().settings.password_min_length).toBe(10)
  })

  it('a cap lowered on A ends on B, at once, a token B has been serving', async () => {
    const u = await createUser(a, { password: PASSWORD })
    const login = await loginOnB(u.username)
    expect(login.statusCode, login.body).toBe(200)
    const token = login.json().user.access_token as string
    clock.advance(2 * HOUR)
    // B has served it: it remembers the token's account (the per-node directory cache).
    expect(await worksOnB(token)).toBe(true)
    await setOnA({ max_access_token_duration_seconds: 3600 })
    expect(await worksOnB(token)).toBe(false)
    // And B holds new logins to it.
    const late = await b.api.post('/v1/auth/login', {
      form: {
        account_id: a.admin.account_id,
        username: u.username,
        password: PASSWORD,
        not_valid_after: new Date(clock.now().getTime() + 2 * HOUR).toISOString(),
      },
    })
    expect(late.statusCode, late.body).toBe(400)
  })

  it('the current cap, read by B in the credential query, holds without the shortening', async () => {
    const u = await createUser(a, { password: PASSWORD })
    const token = (await loginOnB(u.username)).json().user.access_token as string
    expect(await worksOnB(token)).toBe(true)
    // The cap alone, as if the token had been issued while a lowering committed.
    await a.deps.store.db
      .updateTable('account_settings')
      .set({ max_access_token_duration_seconds: 60 })
      .where('account_id', '=', a.admin.account_id)
      .execute()
    clock.advance(60_000)
    expect(await worksOnB(token)).toBe(false)
  })

  it('require_mfa turned on at A refuses a login at B at once', async () => {
    const u = await createUser(a, { password: PASSWORD })
    expect((await loginOnB(u.username)).statusCode).toBe(200)
    await setOnA({ require_mfa: true })
    const refused = await loginOnB(u.username)
    expect(refused.statusCode, refused.body).toBe(403)
    expect(errorOf(refused).code).toBe('MFA_ENROLLMENT_REQUIRED')
  })

  it('the password rules and session revocation set at A apply at B', async () => {
    const u = await createUser(a, { password: PASSWORD })
    const token = (await loginOnB(u.username)).json().user.access_token as string
    await setOnA({ password_min_length: 30, session_revocation_on_password_change: false })
    const short = await b.api.put(`/v1/users/${u.id}/password`, {
      auth: a.admin.api_key,
      json: { password: 'twenty-nine characters long 1' },
    })
    expect(short.statusCode, short.body).toBe(400)
    const ok = await b.api.put(`/v1/users/${u.id}/password`, {
      auth: a.admin.api_key,
      json: { password: 'thirty characters, long enough' },
    })
    expect(ok.statusCode, ok.body).toBe(200)
    expect(await worksOnB(token)).toBe(true)
  })
})
