import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps, type Deps } from '../../src/deps.js'
import { ManualClock } from '../../src/lib/clock.js'
import { openStore, type Store } from '../../src/store/db.js'
import {
  Api,
  b64,
  buildTestApp,
  createUser,
  NO_PROVIDERS,
  TEST_ARGON2,
  TEST_HASHING_LIMITS,
  type TestApp,
} from '../helpers/app.js'
import { assertDescribed, type ResponseWatch, watchResponses } from '../helpers/openapi-harness.js'
import { notificationsDelivered, until } from '../helpers/rights.js'
import { TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Issue 21: resolved credentials are cached per node, and every way a credential or a right
 * ends still holds on the very next request — on the node that made the change (both
 * databases) and, on PostgreSQL, on another node of the same database once the change's
 * notification has reached it (waited for by counting, never by timing), and when that node's
 * every database session was terminated while the change was made (fail closed).
 */
const PASSWORD = 'rights cache pass 1'
const clock = new ManualClock('2030-01-01T00:00:00.000Z')
const masterKey = MasterKey.generate()
const folder = mkdtempSync(join(tmpdir(), 'coffer-rights-cache-'))
const nodeBName = `coffer_test_b_${randomBytes(5).toString('hex')}`

interface Node {
  app: FastifyInstance
  api: Api
  deps: Deps
  store: Store
  responses: ResponseWatch
}

let a: TestApp
let b: Node | undefined
let vault: string

/** A second node on the same PostgreSQL schema, with its own connections (found by name). */
async function secondNode(first: TestApp): Promise<Node> {
  const schema = (
    await sql<{ s: string }>`select current_schema() as s`.execute(first.deps.store.db)
  ).rows[0]?.s as string
  const store = openStore({
    url: TEST_PG_URL,
    pgSchema: schema,
    pgApplicationName: nodeBName,
    pg: { poolSize: 2 },
  })
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
  return { app, api: new Api(app, responses), deps, store, responses }
}

/** Node B has received every change notification node A's committed writes sent. */
const caughtUp = (node: Node) => notificationsDelivered(a.deps.store, node.store)

beforeAll(async () => {
  a = await buildTestApp({ clock, masterKey })
  const res = await a.api.post('/v1/vaults', { auth: a.admin.api_key, form: { name: 'v' } })
  expect(res.statusCode, res.body).toBe(200)
  vault = res.json().vault.id
  if (testDialect === 'postgres') {
    await until('node A listening', () => a.deps.store.rights.trusted)
    b = await secondNode(a)
    await until('node B listening', () => (b as Node).store.rights.trusted)
  }
})
afterAll(async () => {
  await b?.app.close()
  await b?.store.close()
  await a?.close()
  rmSync(folder, { recursive: true, force: true })
  if (b) assertDescribed(b.responses)
})

type Credential = { auth: string } | { basic: { username: string; password: string } }

/**
 * What a way ends: `right` the read of the vault (the credential itself still works),
 * `credential` every request (the read and the self route), `session` the self route (an
 * access token of another account, which cannot read this vault anyway).
 */
type Ends = 'right' | 'credential' | 'session'

/** Whether the credential still does what the way ends. */
async function acts(api: Api, credential: Credential, ends: Ends): Promise<boolean> {
  const me = async () => (await api.get('/v1/auth/me', credential)).statusCode === 200
  if (ends === 'session') return me()
  const read = (await api.get(`/v1/vaults/${vault}`, credential)).statusCode === 200
  if (ends === 'right' || !('auth' in credential)) return read
  const self = await me()
  expect(self, 'the read and the self route agree').toBe(read)
  return read
}

const READ_VAULT = () => [{ Resources: [`Vault::${vault}`], Activities: 'R' }]

/** A group allowing the vault read, and a member of it with an API key and an access token. */
async function member() {
  const g = await a.api.post('/v1/groups', {
    auth: a.admin.api_key,
    form: { name: `g-${randomBytes(4).toString('hex')}`, policy: b64(READ_VAULT()) },
  })
  expect(g.statusCode, g.body).toBe(200)
  const groupId = g.json().group.id as string
  const u = await createUser(a, { password: PASSWORD })
  const add = await a.api.put(`/v1/groups/${groupId}`, {
    auth: a.admin.api_key,
    json: { user_ids: [u.id] },
  })
  expect(add.statusCode, add.body).toBe(200)
  return { ...u, groupId }
}

async function login(username: string, accountId = a.admin.account_id): Promise<string> {
  const res = await a.api.post('/v1/auth/login', {
    form: { account_id: accountId, username, password: PASSWORD },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().user.access_token
}

async function ok(res: { statusCode: number; body: string }) {
  expect(res.statusCode, res.body).toBe(200)
}

async function sat(allowedUses?: number) {
  const res = await a.api.post('/v1/scoped_access_tokens', {
    auth: a.admin.api_key,
    json: {
      name: 'sat',
      policy: READ_VAULT(),
      not_valid_after: '2030-01-02T00:00:00.000Z',
      ...(allowedUses ? { allowed_uses: allowedUses } : {}),
    },
  })
  expect(res.statusCode, res.body).toBe(200)
  const token = res.json().scoped_access_token
  return {
    id: token.id as string,
    basic: token.http_auth as { username: string; password: string },
  }
}

/**
 * Each way a credential or a right ends: `setup` makes a working credential, `end` ends it
 * through node A. `notifies`: the change is one a cached principal is built from (a SAT is
 * never cached: its use count must stay exact, so it is read on every request).
 */
interface Way {
  name: string
  ends: Ends
  setup: () => Promise<{ credential: Credential; end: () => Promise<void>; uses?: number }>
  notifies: boolean
}

const WAYS: Way[] = [
  {
    name: 'logout',
    ends: 'credential',
    notifies: true,
    setup: async () => {
      const u = await member()
      const token = await login(u.username)
      return {
        credential: { auth: token },
        end: () => a.api.post('/v1/auth/logout', { auth: token }).then(ok),
      }
    },
  },
  {
    name: 'logout_all',
    ends: 'credential',
    notifies: true,
    setup: async () => {
      const u = await member()
      const token = await login(u.username)
      const other = await login(u.username)
      return {
        credential: { auth: token },
        end: () => a.api.post('/v1/auth/logout_all', { auth: other }).then(ok),
      }
    },
  },
  {
    name: 'a membership removed',
    ends: 'right',
    notifies: true,
    setup: async () => {
      const u = await member()
      return {
        credential: { auth: u.apiKey },
        end: () =>
          a.api
            .delete(`/v1/groups/${u.groupId}/membership/${u.id}`, { auth: a.admin.api_key })
            .then(ok),
      }
    },
  },
  {
    name: 'a group policy narrowed',
    ends: 'right',
    notifies: true,
    setup: async () => {
      const u = await member()
      const narrower = [
        { Resources: ['Vault::00000000-0000-0000-0000-000000000000'], Activities: 'R' },
      ]
      return {
        credential: { auth: u.accessToken },
        end: () =>
          a.api
            .put(`/v1/groups/${u.groupId}`, {
              auth: a.admin.api_key,
              json: { policy: narrower },
            })
            .then(ok),
      }
    },
  },
  {
    name: 'a group policy emptied',
    ends: 'right',
    notifies: true,
    setup: async () => {
      const u = await member()
      return {
        credential: { auth: u.apiKey },
        end: () =>
          a.api
            .put(`/v1/groups/${u.groupId}`, { auth: a.admin.api_key, json: { policy: [] } })
            .then(ok),
      }
    },
  },
  {
    name: 'a group deleted',
    ends: 'right',
    notifies: true,
    setup: async () => {
      const u = await member()
      return {
        credential: { auth: u.apiKey },
        end: () => a.api.delete(`/v1/groups/${u.groupId}`, { auth: a.admin.api_key }).then(ok),
      }
    },
  },
  {
    name: 'a user deleted',
    ends: 'credential',
    notifies: true,
    setup: async () => {
      const u = await member()
      return {
        credential: { auth: u.accessToken },
        end: () => a.api.delete(`/v1/users/${u.id}`, { auth: a.admin.api_key }).then(ok),
      }
    },
  },
  ...(['DEACTIVATED', 'LOCKED'] as const).map(
    (status): Way => ({
      name: `a user ${status}`,
      ends: 'credential',
      notifies: true,
      setup: async () => {
        const u = await member()
        return {
          credential: { auth: u.apiKey },
          end: () =>
            a.api.put(`/v1/users/${u.id}`, { auth: a.admin.api_key, form: { status } }).then(ok),
        }
      },
    }),
  ),
  {
    name: 'an API key replaced',
    ends: 'credential',
    notifies: true,
    setup: async () => {
      const u = await member()
      return {
        credential: { auth: u.apiKey },
        end: () => a.api.post(`/v1/users/${u.id}/api_key`, { auth: a.admin.api_key }).then(ok),
      }
    },
  },
  {
    name: 'a password change ending the other sessions',
    ends: 'credential',
    notifies: true,
    setup: async () => {
      const u = await member()
      const token = await login(u.username)
      return {
        credential: { auth: token },
        // Set by an administrator: every session of the user ends (the account's default).
        end: () =>
          a.api
            .put(`/v1/users/${u.id}/password`, {
              auth: a.admin.api_key,
              json: { password: 'a new one 12345' },
            })
            .then(ok),
      }
    },
  },
  {
    name: "the account's token cap lowered",
    ends: 'session',
    notifies: true,
    setup: async () => {
      // Its own account: the cap shortens every token of the account for good.
      const admin = await a.newAccount()
      const u = await createUser(a, { password: PASSWORD, auth: admin.api_key })
      const read = await a.api.post('/v1/groups', {
        auth: admin.api_key,
        json: { name: 'readers', policy: b64(READ_VAULT()), user_ids: [u.id] },
      })
      expect(read.statusCode, read.body).toBe(200)
      const token = await login(u.username, admin.account_id)
      clock.advance(120_000)
      return {
        credential: { auth: token },
        end: () =>
          a.api
            .put(`/v1/accounts/${admin.account_id}/settings`, {
              auth: admin.api_key,
              json: { max_access_token_duration_seconds: 60 },
            })
            .then(ok),
      }
    },
  },
  {
    name: 'a SAT deleted',
    ends: 'credential',
    notifies: false,
    setup: async () => {
      const s = await sat()
      return {
        credential: { basic: s.basic },
        end: () =>
          a.api.delete(`/v1/scoped_access_tokens/${s.id}`, { auth: a.admin.api_key }).then(ok),
      }
    },
  },
  {
    name: 'a SAT used up',
    ends: 'credential',
    notifies: false,
    setup: async () => {
      // Two uses: one by the checks below before the end, the last one taken by node A.
      const s = await sat(2)
      return {
        credential: { basic: s.basic },
        uses: 1,
        end: async () => {
          const last = await a.api.get(`/v1/vaults/${vault}`, { basic: s.basic })
          expect(last.statusCode, last.body).toBe(200)
        },
      }
    },
  },
]

describe(`a right that ends holds on the next request (${testDialect})`, () => {
  it('the cache is in use: a repeat caller is served from it', async () => {
    const u = await member()
    const before = a.deps.credentials.cachedCredentials
    expect(await acts(a.api, { auth: u.apiKey }, 'credential')).toBe(true)
    expect(a.deps.credentials.cachedCredentials).toBe(before + 1)
  })

  for (const way of WAYS) {
    it(`on the same node: ${way.name}`, async () => {
      const { credential, end, uses } = await way.setup()
      // Twice: the second is served from the cache (a SAT: read both times, one use each).
      for (let i = 0; i < (uses ?? 2); i++)
        expect(await acts(a.api, credential, way.ends)).toBe(true)
      await end()
      expect(await acts(a.api, credential, way.ends)).toBe(false)
    })
  }
})

/** A vault renamed, then deleted, through A: what `node` reads of it next. */
async function vaultChanges(node: { api: Api; store: Store }) {
  const created = await a.api.post('/v1/vaults', { auth: a.admin.api_key, form: { name: 'old' } })
  expect(created.statusCode, created.body).toBe(200)
  const id = created.json().vault.id as string
  const name = async () => {
    const res = await node.api.get(`/v1/vaults/${id}`, { auth: a.admin.api_key })
    return res.statusCode === 200 ? (res.json().vault.name as string) : res.statusCode
  }
  await notificationsDelivered(a.deps.store, node.store)
  expect([await name(), await name()]).toEqual(['old', 'old'])
  await ok(await a.api.put(`/v1/vaults/${id}`, { auth: a.admin.api_key, form: { name: 'new' } }))
  await notificationsDelivered(a.deps.store, node.store)
  expect(await name()).toBe('new')
  await ok(await a.api.delete(`/v1/vaults/${id}`, { auth: a.admin.api_key }))
  await notificationsDelivered(a.deps.store, node.store)
  expect(await name()).toBe(404)
}

describe(`cached vault rows (${testDialect})`, () => {
  it('a rename and a delete show on the next request of the same node', () =>
    vaultChanges({ api: a.api, store: a.deps.store }))
  it.skipIf(testDialect !== 'postgres')('and of another node', () => vaultChanges(b as Node))
})

describe.skipIf(testDialect !== 'postgres')('across two nodes on one PostgreSQL database', () => {
  for (const way of WAYS) {
    it(`ended on A, refused on B: ${way.name}`, async () => {
      const node = b as Node
      const { credential, end, uses } = await way.setup()
      await caughtUp(node)
      for (let i = 0; i < (uses ?? 2); i++)
        expect(await acts(node.api, credential, way.ends)).toBe(true)
      const sent = a.deps.store.rights.notificationsSent
      await end()
      if (way.notifies) expect(a.deps.store.rights.notificationsSent).toBeGreaterThan(sent)
      await caughtUp(node)
      expect(await acts(node.api, credential, way.ends)).toBe(false)
    })
  }

  it('fails closed: every session of B terminated, a logout on A meanwhile, B refuses next', async () => {
    const node = b as Node
    const u = await member()
    const token = await login(u.username)
    await caughtUp(node)
    expect(await acts(node.api, { auth: token }, 'credential')).toBe(true)
    expect(await acts(node.api, { auth: token }, 'credential')).toBe(true)
    const epoch = node.store.rights.epoch
    const admin = new pg.Client({ connectionString: TEST_PG_URL })
    await admin.connect()
    try {
      const { rows } = await admin.query<{ pid: number }>(
        'select pid from pg_stat_activity where application_name = $1',
        [nodeBName],
      )
      // The pool's connections and the listening one.
      expect(rows.length).toBeGreaterThanOrEqual(2)
      await admin.query('select pg_terminate_backend(p) from unnest($1::int[]) p', [
        rows.map((r) => r.pid),
      ])
    } finally {
      await admin.end()
    }
    // B has seen its listener go (the epoch moves as the cache is dropped); A logs out.
    await until('node B to lose its listener', () => node.store.rights.epoch !== epoch)
    await ok(await a.api.post('/v1/auth/logout', { auth: token }))
    // The very next request: refused (401), or at worst 503 on a pooled connection B has not
    // yet found dead; never served.
    const next = await node.api.get(`/v1/vaults/${vault}`, { auth: token })
    expect([401, 503], next.body).toContain(next.statusCode)
    await until('node B listening again', () => node.store.rights.trusted)
    expect((await node.api.get(`/v1/vaults/${vault}`, { auth: token })).statusCode).toBe(401)
    // And the cache serves again once trusted.
    expect(await acts(node.api, { auth: u.apiKey }, 'credential')).toBe(true)
  })
})
