import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

/**
 * The policy simulator (issue 15, point 4): `POST /v1/policy/explain` and `GET
 * /v1/policy/access`. Every explanation is checked against the real decision: the same request
 * made with the user's own access token (allowed → 2xx, denied → 401 or 404).
 */
let t: TestApp
let vault: string
type User = Awaited<ReturnType<typeof createUser>>
let alice: User
let bob: User
let carol: User
let aliceDoc: string
let bobDoc: string
let unownedDoc: string
let aliceBlob: string
let groupIds: Record<string, string>
/** The bootstrap admin as a subject (full access; its API key stands in for a token). */
const admin = (): User => ({
  id: t.admin.userId,
  username: t.admin.username,
  apiKey: t.admin.api_key,
  accessToken: t.admin.api_key,
})

const post = (json: unknown, auth = t.admin.api_key) =>
  t.api.post('/v1/policy/explain', { auth, json })
const access = (query: Record<string, string>, auth = t.admin.api_key) =>
  t.api.get('/v1/policy/access', { auth, query })

async function group(name: string, policy: PolicyStatement[], members: string[]) {
  const res = await t.api.post('/v1/groups', {
    auth: t.admin.api_key,
    form: { name, policy: b64(policy), user_ids: members.join(',') },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().group.id as string
}

async function createDoc(owner: string | null, auth = t.admin.api_key) {
  const res = await t.api.post(`/v2/vaults/${vault}/documents`, {
    auth,
    json: { document: { n: 1 }, ...(owner ? { owner_id: owner } : {}) },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().document_id as string
}

beforeAll(async () => {
  t = await buildTestApp()
  const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'sim' } })
  vault = v.json().vault.id
  alice = await createUser(t, { username: 'alice' })
  bob = await createUser(t, { username: 'bob' })
  carol = await createUser(t, { username: 'carol' })
  groupIds = {
    own: await group(
      'own-docs',
      [
        { Resources: [`Vault::${vault}::Document::$[Owner=self]`], Activities: 'RUD' },
        { Resources: [`Vault::${vault}::Blob::$[Owner=self]`], Activities: 'R' },
        { Resources: ['User::$[id=self.id]'], Activities: 'R' },
      ],
      [alice.id, bob.id],
    ),
    readers: await group(
      'readers',
      [
        { Resources: [`Vault::${vault}`], Activities: 'R' },
        { Resources: [`Vault::${vault}::Document::`, 'Vault::.*::Document::.*'], Activities: 'R' },
      ],
      [bob.id],
    ),
    creators: await group(
      'creators',
      [
        { Resources: [`Vault::${vault}::Document::`], Activities: 'C' },
        { Resources: [`Vault::${vault}::Document::$[Owner=${alice.id}]`], Activities: 'C' },
      ],
      [alice.id],
    ),
  }
  aliceDoc = await createDoc(alice.id)
  bobDoc = await createDoc(bob.id)
  unownedDoc = await createDoc(null)
  const up = await t.app.inject({
    method: 'POST',
    url: `/v1/vaults/${vault}/blobs?owner_id=${alice.id}`,
    headers: {
      authorization: `Basic ${Buffer.from(`${t.admin.api_key}:`).toString('base64')}`,
      'content-type': 'application/octet-stream',
    },
    payload: Buffer.from('file'),
  })
  expect(up.statusCode, up.body).toBe(200)
  aliceBlob = up.json().blob_id
})
afterAll(() => t.close())

interface Explained {
  activity: string
  allowed: boolean
  granted_by: Record<string, unknown>[]
}

async function explain(user: User, resource: string, activities = 'CRUD') {
  const res = await post({ user_id: user.id, resource, activities })
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  return body.explanation.activities as Explained[]
}

async function allowedBy(user: User, resource: string, activity: string): Promise<Explained> {
  const [one] = await explain(user, resource, activity)
  return one as Explained
}

const allowedStatus = (res: LightMyRequestResponse) => {
  // A refusal is 401 (authorization_error) or, where the item's existence is hidden, 404.
  if (res.statusCode >= 200 && res.statusCode < 300) return true
  expect([401, 404], res.body).toContain(res.statusCode)
  return false
}

describe('explain agrees with the real decision', () => {
  type Case = [string, (u: User) => string, string, (u: User) => Promise<LightMyRequestResponse>]
  const cases: Case[] = [
    [
      'read own document ($[Owner=self])',
      () => `Vault::${vault}::Document::${aliceDoc}`,
      'R',
      (u) => t.api.get(`/v2/vaults/${vault}/documents/${aliceDoc}`, { auth: u.accessToken }),
    ],
    [
      "read another's document",
      () => `Vault::${vault}::Document::${bobDoc}`,
      'R',
      (u) => t.api.get(`/v2/vaults/${vault}/documents/${bobDoc}`, { auth: u.accessToken }),
    ],
    [
      'read an unowned document',
      () => `Vault::${vault}::Document::${unownedDoc}`,
      'R',
      (u) => t.api.get(`/v2/vaults/${vault}/documents/${unownedDoc}`, { auth: u.accessToken }),
    ],
    [
      "update alice's document",
      () => `Vault::${vault}::Document::${aliceDoc}`,
      'U',
      (u) =>
        t.api.put(`/v2/vaults/${vault}/documents/${aliceDoc}`, {
          auth: u.accessToken,
          json: { document: { n: 2 } },
        }),
    ],
    [
      'create an unowned document',
      () => `Vault::${vault}::Document::`,
      'C',
      (u) =>
        t.api.post(`/v2/vaults/${vault}/documents`, {
          auth: u.accessToken,
          json: { document: { n: 3 } },
        }),
    ],
    [
      'create a document owned by alice',
      () => `Vault::${vault}::Document::$[Owner=${alice.id}]`,
      'C',
      (u) =>
        t.api.post(`/v2/vaults/${vault}/documents`, {
          auth: u.accessToken,
          json: { document: { n: 4 }, owner_id: alice.id },
        }),
    ],
    [
      'create a document owned by bob',
      () => `Vault::${vault}::Document::$[Owner=${bob.id}]`,
      'C',
      (u) =>
        t.api.post(`/v2/vaults/${vault}/documents`, {
          auth: u.accessToken,
          json: { document: { n: 5 }, owner_id: bob.id },
        }),
    ],
    [
      "list the vault's documents (readAny)",
      () => `Vault::${vault}::Document::`,
      'R',
      (u) => t.api.get(`/v1/vaults/${vault}/documents`, { auth: u.accessToken }),
    ],
    [
      'read the vault',
      () => `Vault::${vault}`,
      'R',
      (u) => t.api.get(`/v1/vaults/${vault}`, { auth: u.accessToken }),
    ],
    [
      "read alice's BLOB",
      () => `Vault::${vault}::Blob::${aliceBlob}`,
      'R',
      (u) => t.api.get(`/v1/vaults/${vault}/blobs/${aliceBlob}`, { auth: u.accessToken }),
    ],
    [
      'read oneself ($[id=self.id])',
      (u) => `User::${u.id}`,
      'R',
      (u) => t.api.get(`/v1/users/${u.id}`, { auth: u.accessToken }),
    ],
    [
      "read carol's user",
      () => `User::${carol.id}`,
      'R',
      (u) => t.api.get(`/v1/users/${carol.id}`, { auth: u.accessToken }),
    ],
    [
      'list the vaults (readAny: an item matcher is enough)',
      () => 'Vault::',
      'R',
      (u) => t.api.get('/v1/vaults', { auth: u.accessToken }),
    ],
    [
      'list the groups',
      () => 'Group::',
      'R',
      (u) => t.api.get('/v1/groups', { auth: u.accessToken }),
    ],
  ]
  const everyone = () => [alice, bob, carol, admin()]
  for (const [name, res, activity, real] of cases) {
    it(`${name}: alice, bob, carol and the admin`, async () => {
      const seen = new Set<boolean>()
      for (const u of everyone()) {
        const explained = await allowedBy(u, res(u), activity)
        const actual = allowedStatus(await real(u))
        expect(explained.allowed, `${u.username} ${activity} ${res(u)}`).toBe(actual)
        expect(explained.granted_by.length > 0).toBe(explained.allowed)
        seen.add(actual)
      }
      // Every case has someone refused (the admin is allowed everything).
      expect([...seen].sort()).toEqual([false, true])
    })
  }

  it('delete: explained, then done for real', async () => {
    for (const u of everyone()) {
      for (const owner of [alice.id, bob.id, null]) {
        const doc = await createDoc(owner)
        const explained = await allowedBy(u, `Vault::${vault}::Document::${doc}`, 'D')
        const res = await t.api.delete(`/v1/vaults/${vault}/documents/${doc}`, {
          auth: u.accessToken,
        })
        expect(explained.allowed, `${u.username} deletes ${owner}`).toBe(allowedStatus(res))
      }
    }
  })

  it('a pasted policy: the same decision as a group holding it, with no group named', async () => {
    const policy = [{ Resources: [`Vault::${vault}::Document::.*`], Activities: 'RU' }]
    const res = await post({ policy, resource: `Vault::${vault}::Document::${bobDoc}` })
    expect(res.statusCode, res.body).toBe(200)
    const e = res.json().explanation
    expect(e.subject).toEqual({ policy: true })
    expect(e.resource).toBe(`Vault::${vault}::Document::${bobDoc}`)
    expect(e.activities.map((a: Explained) => [a.activity, a.allowed])).toEqual([
      ['C', false],
      ['R', true],
      ['U', true],
      ['D', false],
    ])
    expect(e.activities[1].granted_by).toEqual([
      {
        group_id: null,
        group_name: null,
        statement_index: 0,
        resource_matcher: `Vault::${vault}::Document::.*`,
        activities: 'RU',
      },
    ])
    // The same policy in a group of a fresh user decides the same for real.
    const dave = await createUser(t, { policy })
    const real = await t.api.get(`/v2/vaults/${vault}/documents/${bobDoc}`, {
      auth: dave.accessToken,
    })
    expect(real.statusCode).toBe(200)
    const del = await t.api.delete(`/v1/vaults/${vault}/documents/${bobDoc}`, {
      auth: dave.accessToken,
    })
    expect(del.statusCode).toBe(401)
    // Deactivated, dave leaves his group: the access lists below do not name him.
    expect((await t.api.delete(`/v1/users/${dave.id}`, { auth: t.admin.api_key })).statusCode).toBe(
      200,
    )
  })

  it('a pasted policy has no self: $[Owner=self] matches nothing', async () => {
    const res = await post({
      policy: [{ Resources: [`Vault::${vault}::Document::$[Owner=self]`], Activities: 'R' }],
      resource: `Vault::${vault}::Document::${aliceDoc}`,
      activities: 'r',
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().explanation.activities).toEqual([
      { activity: 'R', allowed: false, granted_by: [] },
    ])
  })
})

describe('explain names the granting statements', () => {
  it('group, statement index, matcher and the owner condition', async () => {
    const [r] = await explain(alice, `Vault::${vault}::Document::${aliceDoc}`, 'R')
    expect(r).toEqual({
      activity: 'R',
      allowed: true,
      granted_by: [
        {
          group_id: groupIds.own,
          group_name: 'own-docs',
          statement_index: 0,
          resource_matcher: `Vault::${vault}::Document::$[Owner=self]`,
          activities: 'RUD',
          condition: 'owner=self',
        },
      ],
    })
  })

  it('every statement that grants, across groups, in order', async () => {
    const res = await post({ user_id: bob.id, resource: `Vault::${vault}::Document::${bobDoc}` })
    expect(res.statusCode, res.body).toBe(200)
    const e = res.json().explanation
    expect(e.subject).toEqual({ user_id: bob.id, username: 'bob', status: 'ACTIVATED' })
    const r = e.activities.find((a: Explained) => a.activity === 'R')
    expect(r.granted_by).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ group_id: groupIds.own, condition: 'owner=self' }),
        expect.objectContaining({
          group_id: groupIds.readers,
          group_name: 'readers',
          statement_index: 1,
          resource_matcher: 'Vault::.*::Document::.*',
        }),
      ]),
    )
    expect(r.granted_by).toHaveLength(2)
  })

  it('a list allowed by an item matcher says it shows only those items', async () => {
    const [r] = await explain(alice, `Vault::${vault}::Document::`, 'R')
    expect(r?.allowed).toBe(true)
    expect(r?.granted_by).toEqual([
      expect.objectContaining({
        group_id: groupIds.own,
        condition: 'list: only items with owner=self',
      }),
    ])
  })

  it('$[id=self.id] says so', async () => {
    const [r] = await explain(carol, `User::${carol.id}`, 'R')
    expect(r).toEqual({ activity: 'R', allowed: false, granted_by: [] })
    const [a] = await explain(alice, `User::${alice.id}`, 'R')
    expect(a?.granted_by).toEqual([expect.objectContaining({ condition: 'id=self' })])
  })

  it('activities default to CRUD, in that order, and take a subset in any order', async () => {
    const all = await explain(bob, `Vault::${vault}`)
    expect(all.map((a) => a.activity)).toEqual(['C', 'R', 'U', 'D'])
    const some = await explain(bob, `Vault::${vault}`, 'dr')
    expect(some.map((a) => a.activity)).toEqual(['R', 'D'])
  })
})

describe('access: who may do anything on a resource', () => {
  it('lists exactly the users whose groups grant, with their letters and the statements', async () => {
    const res = await access({ resource: `Vault::${vault}::Document::${aliceDoc}` })
    expect(res.statusCode, res.body).toBe(200)
    const data = res.json().data
    const byUser = new Map(data.items.map((i: { user_id: string }) => [i.user_id, i]))
    expect([...byUser.keys()].sort()).toEqual([t.admin.userId, alice.id, bob.id].sort())
    // C on an existing item is what the engine answers for `$[Owner=<alice>]` with C; no route
    // asks it (creation is checked on the collection or on `…::$[Owner=X]`), yet it is shown.
    expect(byUser.get(alice.id)).toEqual({
      user_id: alice.id,
      username: 'alice',
      status: 'ACTIVATED',
      activities: 'CRUD',
      granted_by: [
        {
          group_id: groupIds.creators,
          group_name: 'creators',
          statement_index: 1,
          resource_matcher: `Vault::${vault}::Document::$[Owner=${alice.id}]`,
          activities: 'C',
          condition: `owner=${alice.id}`,
        },
        {
          group_id: groupIds.own,
          group_name: 'own-docs',
          statement_index: 0,
          resource_matcher: `Vault::${vault}::Document::$[Owner=self]`,
          activities: 'RUD',
          condition: 'owner=self',
        },
      ],
    })
    expect(byUser.get(bob.id)).toMatchObject({ activities: 'R' })
    expect(byUser.get(t.admin.userId)).toMatchObject({ activities: 'CRUD' })
    expect(data.info).toEqual({
      current_page: 1,
      per_page: 100,
      num_pages: 1,
      total_result_count: 3,
    })
  })

  it('every listed user is allowed for real, every other one refused', async () => {
    const resource = `Vault::${vault}::Document::${bobDoc}`
    const res = await access({ resource })
    const listed = new Set(res.json().data.items.map((i: { user_id: string }) => i.user_id))
    for (const u of [alice, bob, carol]) {
      const real = await t.api.get(`/v2/vaults/${vault}/documents/${bobDoc}`, {
        auth: u.accessToken,
      })
      expect(listed.has(u.id), u.username).toBe(allowedStatus(real))
    }
  })

  it.each([
    [
      'a user ($[id=self.id] names only that user)',
      () => `User::${alice.id}`,
      (u: User) => t.api.get(`/v1/users/${alice.id}`, { auth: u.accessToken }),
    ],
    [
      'the users list (readAny)',
      () => 'User::',
      (u: User) => t.api.get('/v1/users', { auth: u.accessToken }),
    ],
    [
      "alice's BLOB",
      () => `Vault::${vault}::Blob::${aliceBlob}`,
      (u: User) => t.api.get(`/v1/vaults/${vault}/blobs/${aliceBlob}`, { auth: u.accessToken }),
    ],
  ])(
    '%s: the readers listed are exactly those the real read lets in',
    async (_name, resource, read) => {
      const res = await access({ resource: resource() })
      expect(res.statusCode, res.body).toBe(200)
      const readers = new Set(
        res
          .json()
          .data.items.filter((i: { activities: string }) => i.activities.includes('R'))
          .map((i: { user_id: string }) => i.user_id),
      )
      const seen = new Set<boolean>()
      for (const u of [alice, bob, carol, admin()]) {
        const allowed = allowedStatus(await read(u))
        expect(readers.has(u.id), u.username).toBe(allowed)
        seen.add(allowed)
      }
      expect([...seen].sort()).toEqual([false, true])
    },
  )

  it('pages: edges of page and per_page', async () => {
    const resource = `Vault::${vault}`
    const all = (await access({ resource })).json().data
    expect(all.info.total_result_count).toBe(2)
    const ids = all.items.map((i: { user_id: string }) => i.user_id)
    expect(ids).toEqual([...ids].sort())
    const first = (await access({ resource, per_page: '1' })).json().data
    expect(first.items.map((i: { user_id: string }) => i.user_id)).toEqual([ids[0]])
    expect(first.info).toEqual({
      current_page: 1,
      per_page: 1,
      num_pages: 2,
      total_result_count: 2,
    })
    const second = (await access({ resource, per_page: '1', page: '2' })).json().data
    expect(second.items.map((i: { user_id: string }) => i.user_id)).toEqual([ids[1]])
    const beyond = (await access({ resource, per_page: '1', page: '3' })).json().data
    expect(beyond.items).toEqual([])
    expect(beyond.info.total_result_count).toBe(2)
    const max = await access({ resource, per_page: '500' })
    expect(max.statusCode).toBe(200)
    for (const [q, field] of [
      [{ per_page: '0' }, 'per_page'],
      [{ per_page: '501' }, 'per_page'],
      [{ page: '0' }, 'page'],
    ] as const) {
      const bad = await access({ resource, ...q })
      expect(bad.statusCode).toBe(400)
      expect(errorOf(bad).message).toContain(field)
    }
  })

  it('a resource only the admin may touch lists only the admin', async () => {
    const res = await access({
      resource: 'PasswordResetFlow::0190f3a0-0000-7000-8000-00000000f001',
    })
    expect(res.statusCode).toBe(200)
    expect(res.json().data.items.map((i: { user_id: string }) => i.user_id)).toEqual([
      t.admin.userId,
    ])
  })
})

describe('validation: a 400 naming the field', () => {
  const doc = () => `Vault::${vault}::Document::${aliceDoc}`
  it.each<[string, () => unknown, string]>([
    ['no subject', () => ({ resource: doc() }), 'user_id'],
    ['both subjects', () => ({ user_id: alice.id, policy: [], resource: doc() }), 'policy'],
    ['a malformed user id', () => ({ user_id: 'nope', resource: doc() }), 'user_id'],
    [
      'a user of no account of the caller',
      () => ({ user_id: '0190f3a0-0000-7000-8000-0000000000ff', resource: doc() }),
      'user_id',
    ],
    ['a policy that is not an array', () => ({ policy: { a: 1 }, resource: doc() }), 'policy'],
    [
      'a statement without Activities',
      () => ({ policy: [{ Resources: ['Vault::.*'] }], resource: doc() }),
      'policy',
    ],
    [
      'activities with another letter',
      () => ({ policy: [{ Resources: ['Vault::.*'], Activities: 'RX' }], resource: doc() }),
      'policy',
    ],
    ['no resource', () => ({ user_id: alice.id }), 'resource'],
    ['an empty resource', () => ({ user_id: alice.id, resource: '' }), 'resource'],
    ['an unknown type', () => ({ user_id: alice.id, resource: 'Vaults::x' }), 'resource'],
    ['a wildcard id', () => ({ user_id: alice.id, resource: 'Vault::.*' }), 'resource'],
    ['a keyword id', () => ({ user_id: alice.id, resource: 'User::$[id=self.id]' }), 'resource'],
    [
      'an empty middle token',
      () => ({ user_id: alice.id, resource: 'Vault::::Document::' }),
      'resource',
    ],
    [
      'a control character',
      () => ({ user_id: alice.id, resource: `Vault::${vault}\n` }),
      'resource',
    ],
    [
      'a resource over 1024 characters',
      () => ({ user_id: alice.id, resource: `Vault::${'a'.repeat(1018)}` }),
      'resource',
    ],
    [
      'a document this account does not have',
      () => ({ user_id: alice.id, resource: `Vault::${vault}::Document::${alice.id}` }),
      'resource',
    ],
    [
      'empty activities',
      () => ({ user_id: alice.id, resource: doc(), activities: '' }),
      'activities',
    ],
    [
      'activities beyond CRUD',
      () => ({ user_id: alice.id, resource: doc(), activities: 'RA' }),
      'activities',
    ],
  ])('%s', async (_name, body, field) => {
    const res = await post(body())
    expect(res.statusCode, res.body).toBe(400)
    const error = errorOf(res)
    expect(error.type).toBe('invalid_request_error')
    expect(error.message.startsWith(field), error.message).toBe(true)
  })

  it('the resource limit is 1024 characters: exactly that is accepted, one more refused', async () => {
    // Ids are at most 128 characters: seven `Vault::<128>` pairs and one more of 58.
    const pairs = Array(7)
      .fill(`Vault::${'a'.repeat(128)}`)
      .join('::')
    const resource = `${pairs}::Vault::${'b'.repeat(58)}`
    expect(resource).toHaveLength(1024)
    const res = await post({ user_id: alice.id, resource })
    expect(res.statusCode, res.body).toBe(200)
    const over = await post({ user_id: alice.id, resource: `${resource}c` })
    expect(over.statusCode).toBe(400)
    expect(errorOf(over).message).toBe('resource must NOT have more than 1024 characters')
    const longId = await post({ user_id: alice.id, resource: `Vault::${'a'.repeat(129)}` })
    expect(errorOf(longId).message).toMatch(/^resource holds/)
    const maxId = await post({ user_id: alice.id, resource: `Vault::${'a'.repeat(128)}` })
    expect(maxId.statusCode).toBe(200)
  })

  it('access: a missing or invalid resource', async () => {
    const queries: Record<string, string>[] = [
      {},
      { resource: 'Nope::' },
      { resource: 'Vault::.*' },
    ]
    for (const query of queries) {
      const res = await access(query)
      expect(res.statusCode, res.body).toBe(400)
      expect(errorOf(res).message.startsWith('resource'), errorOf(res).message).toBe(true)
    }
  })

  it("another account's document is not found, and its users are no subjects", async () => {
    const other = await t.newAccount()
    const res = await post(
      { user_id: alice.id, resource: `Vault::${vault}::Document::${aliceDoc}` },
      other.api_key,
    )
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).message).toMatch(/^user_id/)
    const pasted = await post(
      { policy: [], resource: `Vault::${vault}::Document::${aliceDoc}` },
      other.api_key,
    )
    expect(pasted.statusCode).toBe(400)
    expect(errorOf(pasted).message).toMatch(/^resource/)
    const list = await access({ resource: `Vault::${vault}` }, other.api_key)
    expect(list.json().data.items.map((i: { user_id: string }) => i.user_id)).toEqual([
      other.userId,
    ])
  })
})

describe('the audit trail', () => {
  const lastEvent = async (operation: string) => {
    const row = await t.deps.store.db
      .selectFrom('audit_events')
      .selectAll()
      .where('operation', '=', operation)
      .orderBy('seq', 'desc')
      .executeTakeFirstOrThrow()
    return { ...row, resources: JSON.parse(row.resources) }
  }

  it('an explanation names its subject and the records of the resource', async () => {
    await post({ user_id: bob.id, resource: `Vault::${vault}::Document::${aliceDoc}` })
    const e = await lastEvent('policy.explain')
    expect(e).toMatchObject({ decision: 'allowed', actor_user_id: t.admin.userId })
    expect(e.resources).toEqual({ user: [bob.id], vault: [vault], document: [aliceDoc] })
  })

  it('an access query names the users it answered; a refusal is recorded as denied', async () => {
    const res = await access({ resource: `Vault::${vault}`, per_page: '1' })
    const shown = res.json().data.items.map((i: { user_id: string }) => i.user_id)
    const e = await lastEvent('policy.access')
    expect(e.resources).toEqual({ vault: [vault], user: shown })
    await access({ resource: `Vault::${vault}` }, carol.apiKey)
    expect(await lastEvent('policy.access')).toMatchObject({
      decision: 'denied',
      actor_user_id: carol.id,
      status: 401,
    })
  })
})

describe('authorisation', () => {
  it('needs R on PolicySimulator::: a caller without it is refused (401 authorization_error)', async () => {
    const body = { user_id: alice.id, resource: `Vault::${vault}` }
    for (const res of [
      await post(body, alice.apiKey),
      await access({ resource: `Vault::${vault}` }, alice.accessToken),
    ]) {
      expect(res.statusCode).toBe(401)
      expect(errorOf(res).type).toBe('authorization_error')
    }
    const simulator = await createUser(t, {
      policy: [{ Resources: ['PolicySimulator::'], Activities: 'R' }],
    })
    expect((await post(body, simulator.accessToken)).statusCode).toBe(200)
    expect((await access({ resource: `Vault::${vault}` }, simulator.apiKey)).statusCode).toBe(200)
    // Other letters on it grant nothing here.
    const writer = await createUser(t, {
      policy: [{ Resources: ['PolicySimulator::'], Activities: 'CUD' }],
    })
    expect((await post(body, writer.apiKey)).statusCode).toBe(401)
  })

  it('a SAT is refused, even one whose policy holds PolicySimulator::', async () => {
    const res = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'simulator',
        policy: [{ Resources: ['PolicySimulator::'], Activities: 'R' }],
        not_valid_after: new Date(Date.now() + 3_600_000).toISOString(),
      },
    })
    expect(res.statusCode, res.body).toBe(200)
    const { username, password } = res.json().scoped_access_token.http_auth
    const basic = { username, password }
    const explained = await t.api.post('/v1/policy/explain', {
      basic,
      json: { user_id: alice.id, resource: `Vault::${vault}` },
    })
    expect(explained.statusCode).toBe(401)
    expect(errorOf(explained).code).toBe('CREDENTIAL_NOT_ALLOWED')
    const listed = await t.api.get('/v1/policy/access', {
      basic,
      query: { resource: `Vault::${vault}` },
    })
    expect(listed.statusCode).toBe(401)
    expect(errorOf(listed).code).toBe('CREDENTIAL_NOT_ALLOWED')
  })
})

describe('the access limit (users × groups)', () => {
  let small: TestApp
  beforeAll(async () => {
    // The bootstrap account has 1 user and 1 group; 2 users × 3 groups = 6 is the edge.
    small = await buildTestApp({ policyAccessMaxPairs: 6 })
  })
  afterAll(() => small.close())

  it('answers at the limit and refuses one pair beyond it', async () => {
    const q = { resource: 'Vault::' }
    const get = () => small.api.get('/v1/policy/access', { auth: small.admin.api_key, query: q })
    await createUser(small, { policy: [{ Resources: ['Vault::'], Activities: 'R' }] })
    await small.api.post('/v1/groups', { auth: small.admin.api_key, form: { name: 'third' } })
    const atLimit = await get()
    expect(atLimit.statusCode, atLimit.body).toBe(200)
    expect(atLimit.json().data.info.total_result_count).toBe(2)
    await createUser(small)
    const over = await get()
    expect(over.statusCode).toBe(400)
    const error = errorOf(over)
    expect(error.code).toBe('SIMULATION_TOO_LARGE')
    expect(error.message).toContain('3 users and 3 groups')
    expect(error.message).toContain('at most 6')
    // The explanation of one user is not bounded by it.
    const one = await small.api.post('/v1/policy/explain', {
      auth: small.admin.api_key,
      json: { user_id: small.admin.userId, resource: 'Vault::' },
    })
    expect(one.statusCode).toBe(200)
  })
})

describe('the granted_by limit (50 statements named; the answer is never cut)', () => {
  // Statement i grants R on every vault: each is a distinct granting statement.
  const statements = (n: number, activities = 'R'): PolicyStatement[] =>
    Array.from({ length: n }, () => ({ Resources: ['Vault::.*'], Activities: activities }))

  it('explain names at most 50 statements per activity and says when there were more', async () => {
    for (const [n, shown, truncated] of [
      [50, 50, false],
      [51, 50, true],
    ] as const) {
      const res = await post({
        policy: statements(n),
        resource: `Vault::${vault}`,
        activities: 'R',
      })
      expect(res.statusCode, res.body).toBe(200)
      const [r] = res.json().explanation.activities
      expect(r.allowed).toBe(true)
      expect(r.granted_by).toHaveLength(shown)
      expect(r.granted_by[shown - 1].statement_index).toBe(shown - 1)
      expect(r.granted_by_truncated === true).toBe(truncated)
    }
  })

  it("a statement's Activities are named by their letters, each once", async () => {
    // A long Activities string was echoed in every entry: a 1 MiB body answered hundreds of MiB.
    const res = await post({
      policy: [{ Resources: ['Vault::.*'], Activities: `${'r'.repeat(500)}U${'R'.repeat(500)}` }],
      resource: `Vault::${vault}`,
      activities: 'R',
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().explanation.activities[0].granted_by[0].activities).toBe('RU')
  })

  it('access names at most 50 statements per user and says when there were more', async () => {
    const at = await createUser(t, { username: 'fifty', policy: statements(50, 'RU') })
    const over = await createUser(t, { username: 'fifty-one', policy: statements(51) })
    const res = await access({ resource: `Vault::${vault}`, per_page: '500' })
    expect(res.statusCode, res.body).toBe(200)
    const items = res.json().data.items as Record<string, unknown>[]
    const atItem = items.find((i) => i.user_id === at.id) as Record<string, unknown>
    const overItem = items.find((i) => i.user_id === over.id) as Record<string, unknown>
    // 50 statements granting R and U: each named once, not once per letter.
    expect(atItem.activities).toBe('RU')
    expect(atItem.granted_by).toHaveLength(50)
    expect(atItem.granted_by_truncated).toBeUndefined()
    expect(overItem.activities).toBe('R')
    expect(overItem.granted_by).toHaveLength(50)
    expect(overItem.granted_by_truncated).toBe(true)
  })
})
