import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp, unb64 } from '../helpers/app.js'
import { optionForm, searchData } from '../helpers/search-fixtures.js'

interface UserSchemaBody {
  id: string
  name: string
  fields: { name: string; type: string; index: boolean }[]
  vault_id: string
}

interface UserHit {
  id: string
  user_id: string
  username: string
  status: string
  attributes?: string
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const MISSING = '00000000-0000-4000-8000-000000000000'

function userSchemaOf(res: LightMyRequestResponse): UserSchemaBody {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  expect(body.transaction_id).toMatch(UUID)
  return body.user_schema as UserSchemaBody
}

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp) {
  expect(res.statusCode, res.body).toBe(status)
  const error = errorOf(res)
  if (message) expect(error.message).toMatch(message)
  return error
}

describe('/v1/accounts/{account_id}/user_schema', () => {
  let t: TestApp
  let admin: string
  let path: string

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
    path = `/v1/accounts/${t.admin.account_id}/user_schema`
  })
  afterAll(() => t.close())

  const get = (auth = admin, url = path) => t.api.get(url, { auth })
  const put = (def: unknown, auth = admin, url = path) =>
    t.api.put(url, { auth, form: { schema: b64(def) } })
  const post = (def: unknown, auth = admin, url = path) =>
    t.api.post(url, { auth, form: { schema: b64(def) } })
  const del = (auth = admin, url = path) => t.api.delete(url, { auth })
  const search = async (option: Record<string, unknown>, auth = admin) =>
    searchData<UserHit>(
      await t.api.post('/v1/users/search', { auth, multipart: optionForm(option) }),
    )
  const usernames = async (filter: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    (await search({ filter, ...extra })).documents.map((u) => u.username).sort()
  const eq = (value: unknown) => ({ type: 'eq', value })
  const newUser = async (username: string, attributes?: unknown, status?: string) => {
    const form: Record<string, string> = { username }
    if (attributes !== undefined) form.attributes = b64(attributes)
    if (status) form.status = status
    const res = await t.api.post('/v1/users', { auth: admin, form })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().user.id as string
  }
  const userWith = (policy: PolicyStatement[]) => createUser(t, { policy })

  // Runs first: the account's initial schema, before any test changes it.
  it('a new account already has one: no fields, a stable UUID vault_id', async () => {
    const first = userSchemaOf(await get())
    expect(Object.keys(first).sort()).toEqual(['fields', 'id', 'name', 'vault_id'])
    expect(first).toEqual({
      id: expect.stringMatching(UUID),
      name: 'user_schema',
      fields: [],
      vault_id: expect.stringMatching(UUID),
    })
    expect(userSchemaOf(await get())).toEqual(first)
    const upper = `/v1/accounts/${t.admin.account_id.toUpperCase()}/user_schema`
    expect(userSchemaOf(await get(admin, upper))).toEqual(first)
    // Every account has its own.
    const other = await t.newAccount()
    const theirs = userSchemaOf(
      await get(other.api_key, `/v1/accounts/${other.account_id}/user_schema`),
    )
    expect(theirs.id).not.toBe(first.id)
    expect(theirs.vault_id).toMatch(UUID)
    expect(theirs.vault_id).not.toBe(first.vault_id)
  })

  it('system fields are searchable with the initial schema; null attributes hide a user; DEACTIVATED is found', async () => {
    const plain = await newUser('sys-plain')
    const nulled = await newUser('sys-nulled', { a: 1 })
    const gone = await newUser('sys-gone', {})
    await newUser('sys-pending', undefined, 'PENDING')
    expect(await usernames({ '$sys.username': eq('sys-plain') })).toEqual(['sys-plain'])
    expect(await usernames({ '$tv.username': { type: 'wildcard', value: 'sys-*' } })).toEqual([
      'sys-gone',
      'sys-nulled',
      'sys-pending',
      'sys-plain',
    ])
    expect(await usernames({ '$tv.status': eq('PENDING') })).toEqual(['sys-pending'])
    expect(await usernames({ '$sys.id': eq(plain) })).toEqual(['sys-plain'])
    // Attributes set to JSON null: no longer searchable at all.
    const res = await t.api.put(`/v1/users/${nulled}`, {
      auth: admin,
      form: { attributes: b64(null) },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(await usernames({ '$sys.username': eq('sys-nulled') })).toEqual([])
    expect(await usernames({ '$sys.id': { type: 'in', value: [nulled, plain] } })).toEqual([
      'sys-plain',
    ])
    // Back to an object: searchable again.
    await t.api.put(`/v1/users/${nulled}`, { auth: admin, form: { attributes: b64({}) } })
    expect(await usernames({ '$sys.username': eq('sys-nulled') })).toEqual(['sys-nulled'])
    await t.api.put(`/v1/users/${nulled}`, { auth: admin, form: { attributes: b64(null) } })
    // A deleted user is DEACTIVATED and still found by that status.
    expect((await t.api.delete(`/v1/users/${gone}`, { auth: admin })).statusCode).toBe(200)
    expect(await usernames({ '$sys.status': eq('DEACTIVATED') })).toEqual(['sys-gone'])
    expect(await usernames({ '$sys.username': eq('sys-gone') })).toEqual(['sys-gone'])
    // Attribute fields are not searchable while the schema has none.
    const bad = await t.api.post('/v1/users/search', {
      auth: admin,
      multipart: optionForm({ filter: { a: eq(1) } }),
    })
    expectError(bad, 400, /\ba\b/)
  })

  it('POST while one exists is a 400 and changes nothing', async () => {
    const before = userSchemaOf(await get())
    const res = await post({ name: 'another', fields: [{ name: 'x' }] })
    const error = expectError(res, 400, /already has a user schema/)
    expect(error.code).toBe('USER_SCHEMA_EXISTS')
    expect(userSchemaOf(await get())).toEqual(before)
  })

  it('PUT replaces name and fields and re-indexes every user created before', async () => {
    const before = userSchemaOf(await get())
    const early = await newUser('early', { email: 'early@example.com', age: 40, nick: 'E' })
    await newUser('early-locked', { email: 'locked@example.com', age: '30' }, 'LOCKED')
    const nulledEarly = await newUser('early-nulled', { email: 'nulled@example.com' })
    await t.api.put(`/v1/users/${nulledEarly}`, { auth: admin, form: { attributes: b64(null) } })
    const deactivatedEarly = await newUser('early-gone', { email: 'gone@example.com', age: 99 })
    await t.api.delete(`/v1/users/${deactivatedEarly}`, { auth: admin })

    const fields = [
      { name: 'email', type: 'string', index: true },
      { name: 'age', type: 'integer', index: 1 },
      { name: 'nick', type: 'string', index: false },
    ]
    const updated = userSchemaOf(await put({ name: 'people', fields }))
    expect(updated).toEqual({
      id: before.id,
      name: 'people',
      fields: [
        { name: 'email', type: 'string', index: true },
        { name: 'age', type: 'integer', index: true },
        { name: 'nick', type: 'string', index: false },
      ],
      vault_id: before.vault_id,
    })
    expect(userSchemaOf(await get())).toEqual(updated)

    // Users made before the PUT are found by the new fields.
    expect(await usernames({ email: eq('early@example.com') })).toEqual(['early'])
    expect(await usernames({ age: { type: 'range', value: { gte: 30 } } })).toEqual([
      'early',
      'early-gone',
      'early-locked',
    ])
    const full = await search({ filter: { email: eq('early@example.com') }, full_document: true })
    expect(full.documents).toHaveLength(1)
    expect(full.documents[0]?.id).toBe(early)
    expect(unb64(full.documents[0]?.attributes as string)).toEqual({
      email: 'early@example.com',
      age: 40,
      nick: 'E',
    })
    // System fields stay searchable, statuses are those of the users, null still hides.
    expect(
      await usernames({ age: eq(30), '$sys.status': eq('LOCKED') }, { filter_type: 'and' }),
    ).toEqual(['early-locked'])
    expect(await usernames({ email: eq('nulled@example.com') })).toEqual([])
    expect(await usernames({ '$sys.username': eq('early-nulled') })).toEqual([])
    expect(
      await usernames(
        { email: eq('gone@example.com'), '$sys.status': eq('DEACTIVATED') },
        { filter_type: 'and' },
      ),
    ).toEqual(['early-gone'])
    // Not indexed: a 400 naming the field.
    const nick = await t.api.post('/v1/users/search', {
      auth: admin,
      multipart: optionForm({ filter: { nick: eq('E') } }),
    })
    expectError(nick, 400, /nick/)
    // Users made after the PUT are indexed under it at once.
    await newUser('late', { email: 'late@example.com' })
    expect(await usernames({ email: { type: 'wildcard', value: '*@example.com' } })).toEqual([
      'early',
      'early-gone',
      'early-locked',
      'late',
    ])

    // Another PUT re-indexes again: age as a string field now, email dropped.
    userSchemaOf(await put({ name: 'people', fields: [{ name: 'age', type: 'string' }] }))
    expect(await usernames({ age: eq('30') })).toEqual(['early-locked'])
    expect(await usernames({ age: eq('40') })).toEqual(['early'])
    const dropped = await t.api.post('/v1/users/search', {
      auth: admin,
      multipart: optionForm({ filter: { email: eq('early@example.com') } }),
    })
    expectError(dropped, 400, /email/)
  })

  it('users written while the fields change end up indexed under the new fields', async () => {
    // Regression: on PostgreSQL a user created or updated while the user schema changed kept its
    // index rows under the old fields.
    const before = userSchemaOf(await get())
    const existing: string[] = []
    for (let i = 0; i < 10; i++) existing.push(await newUser(`race-old-${i}`, { a: 'x' }))
    const writes = [
      ...Array.from({ length: 30 }, (_, i) =>
        t.api.post('/v1/users', {
          auth: admin,
          form: { username: `race-new-${i}`, attributes: b64({ race: 'yes' }) },
        }),
      ),
      ...existing.map((id) =>
        t.api.put(`/v1/users/${id}`, { auth: admin, form: { attributes: b64({ race: 'yes' }) } }),
      ),
    ]
    const change = new Promise((resolve) => setTimeout(resolve, 5)).then(() =>
      put({ name: before.name, fields: [...before.fields, { name: 'race', type: 'string' }] }),
    )
    for (const res of await Promise.all([...writes, change]))
      expect(res.statusCode, res.body).toBe(200)
    const found = await search({ filter: { race: eq('yes') }, per_page: 100 })
    expect(found.info.total_result_count).toBe(40)
    userSchemaOf(await put({ name: before.name, fields: before.fields }))
  })

  it('PUT validates the definition like vault schemas (multipart and query string accepted)', async () => {
    const before = userSchemaOf(await get())
    const cases: [unknown, RegExp][] = [
      [{ fields: [] }, /^schema name is required/],
      [{ name: 'x', fields: 'email' }, /^schema fields must be an array/],
      [{ name: 'x', fields: [{ name: '$sys.username' }] }, /reserved prefix/],
      [{ name: 'x', fields: [{ name: '$tv.status' }] }, /reserved prefix/],
      [{ name: 'x', fields: [{ name: 'Email' }, { name: 'email' }] }, /is used twice/],
      [{ name: 'x', fields: [{ name: 'a', type: 'uuid' }] }, /fields\[0\]\.type must be one of/],
      [{ name: 'x', fields: [{ name: 'a..b' }] }, /empty path segments/],
    ]
    for (const [def, message] of cases) expectError(await put(def), 400, message)
    expectError(await t.api.put(path, { auth: admin }), 400, /^schema is required/)
    expect(userSchemaOf(await get())).toEqual(before)
    const multi = userSchemaOf(
      await t.api.put(path, {
        auth: admin,
        multipart: { schema: b64({ name: before.name, fields: before.fields }) },
      }),
    )
    expect(multi).toEqual(before)
    const query = userSchemaOf(
      await t.api.put(path, {
        auth: admin,
        query: { schema: b64({ name: before.name, fields: before.fields }) },
      }),
    )
    expect(query).toEqual(before)
  })

  it('DELETE is refused while the account has users (it always has its admin)', async () => {
    const before = userSchemaOf(await get())
    const error = expectError(await del(), 400, /cannot be deleted while the account has users/)
    expect(error.code).toBe('USER_SCHEMA_IN_USE')
    expect(userSchemaOf(await get())).toEqual(before)
    // A form body (the SDK sends an empty multipart one) changes nothing.
    const withBody = await t.api.delete(path, { auth: admin, multipart: {} })
    expect(errorOf(withBody).code).toBe('USER_SCHEMA_IN_USE')
  })

  it('another account’s id is a 404, a malformed one a 400', async () => {
    const other = await t.newAccount()
    const theirs = `/v1/accounts/${other.account_id}/user_schema`
    const def = { name: 'hijack', fields: [{ name: 'x' }] }
    expectError(await get(admin, theirs), 404)
    expectError(await put(def, admin, theirs), 404)
    expectError(await post(def, admin, theirs), 404)
    expectError(await del(admin, theirs), 404)
    expectError(await get(admin, `/v1/accounts/${MISSING}/user_schema`), 404)
    expectError(await get(admin, '/v1/accounts/nope/user_schema'), 400, /account_id/)
    expect(userSchemaOf(await get(other.api_key, theirs))).toMatchObject({
      name: 'user_schema',
      fields: [],
    })
  })

  it('permissions on UserSchema:: (C, R, U, D); 401 without credentials', async () => {
    const on = (activities: string) =>
      userWith([{ Resources: ['UserSchema::'], Activities: activities }])
    const creator = await on('C')
    const reader = await on('R')
    const updater = await on('U')
    const deleter = await on('D')
    const before = userSchemaOf(await get())
    const def = { name: before.name, fields: before.fields }

    expect(userSchemaOf(await get(reader.apiKey))).toEqual(before)
    for (const u of [creator, updater, deleter]) expectError(await get(u.apiKey), 401)

    expect(userSchemaOf(await put(def, updater.apiKey))).toEqual(before)
    for (const u of [creator, reader, deleter]) expectError(await put(def, u.apiKey), 401)

    // C passes the policy and meets the existing schema; the others are refused first.
    expect(errorOf(await post(def, creator.apiKey)).code).toBe('USER_SCHEMA_EXISTS')
    for (const u of [reader, updater, deleter]) expectError(await post(def, u.apiKey), 401)

    expect(errorOf(await del(deleter.apiKey)).code).toBe('USER_SCHEMA_IN_USE')
    for (const u of [creator, reader, updater]) expectError(await del(u.apiKey), 401)

    // User or vault rights are not user-schema rights.
    const other = await userWith([{ Resources: ['User::.*', 'Vault::.*'], Activities: 'CRUD' }])
    expectError(await get(other.apiKey), 401)
    // An access token works like the API key.
    expect(userSchemaOf(await t.api.get(path, { auth: reader.accessToken }))).toEqual(before)

    expectError(await t.api.get(path), 401)
    expectError(await t.api.put(path, { form: { schema: b64(def) } }), 401)
    expectError(await t.api.post(path, { form: { schema: b64(def) } }), 401)
    expectError(await t.api.delete(path), 401)
  })

  it('POST creates one when the account has none, and indexes every user', async () => {
    // Not reachable through the API (DELETE always fails): remove the row behind its back.
    await t.deps.store.db
      .deleteFrom('user_schemas')
      .where('account_id', '=', t.admin.account_id)
      .execute()
    expectError(await get(), 404)
    expect(await usernames({ '$sys.username': eq('early') })).toEqual([])
    const fields = [{ name: 'email', type: 'string', index: true }]
    const created = userSchemaOf(await post({ name: 'again', fields }))
    expect(created).toEqual({
      id: expect.stringMatching(UUID),
      name: 'again',
      fields,
      vault_id: expect.stringMatching(UUID),
    })
    expect(userSchemaOf(await get())).toEqual(created)
    expect(await usernames({ email: eq('early@example.com') })).toEqual(['early'])
    expect(await usernames({ '$sys.username': eq('early') })).toEqual(['early'])
    expect(errorOf(await post({ name: 'again', fields })).code).toBe('USER_SCHEMA_EXISTS')
  })
})
