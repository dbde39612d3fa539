import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { b64, buildTestApp, createUser, errorOf, type TestApp, unb64 } from '../helpers/app.js'
import { optionForm, searchData } from '../helpers/search-fixtures.js'

interface UserHit {
  id: string
  user_id: string
  username: string
  status: string
  document_id: string
  owner_id: null
  attributes?: string
  document?: string
}

// Users made through the API, so the write path's index maintenance is exercised too.
const PEOPLE = [
  { username: 'u-alice', status: 'ACTIVATED', attributes: { email: 'Alice@Example.com', age: 30 } },
  { username: 'u-bob', status: 'PENDING', attributes: { email: 'bob@example.org', age: 25 } },
  {
    username: 'u-carol',
    status: 'LOCKED',
    attributes: { email: 'carol@example.com', tags: ['x'] },
  },
  { username: 'u-dave', status: 'ACTIVATED', attributes: { age: '41', tags: ['x', 'y'] } },
  { username: 'u-erin', status: 'ACTIVATED', attributes: {} },
  { username: 'u-null', status: 'ACTIVATED', attributes: null },
]

describe('POST /v1/users/search', () => {
  let t: TestApp
  let admin: string
  const ids: string[] = []

  const post = (option: unknown, auth = admin) =>
    t.api.post('/v1/users/search', { auth, multipart: optionForm(option) })
  const data = async (option: Record<string, unknown>, auth = admin) =>
    searchData<UserHit>(await post(option, auth))
  /** Usernames found, in result order. */
  const names = async (option: Record<string, unknown>, auth = admin) =>
    (await data(option, auth)).documents.map((u) => u.username)
  /** Only the users made here (the account also has its admin and the permission test users). */
  const ours = { type: 'wildcard', value: 'u-*' }
  const bad = async (option: unknown, message: RegExp) => {
    const res: LightMyRequestResponse = await post(option)
    expect(res.statusCode, res.body).toBe(400)
    expect(errorOf(res).message).toMatch(message)
  }

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
    const fields = [
      { name: 'email', type: 'string' },
      { name: 'age', type: 'integer' },
      { name: 'tags', type: 'string' },
      { name: 'secret', type: 'string', index: false },
    ]
    const schema = await t.api.put(`/v1/accounts/${t.admin.account_id}/user_schema`, {
      auth: admin,
      form: { schema: b64({ name: 'people', fields }) },
    })
    expect(schema.statusCode, schema.body).toBe(200)
    for (const p of PEOPLE) {
      const res = await t.api.post('/v1/users', {
        auth: admin,
        form: {
          username: p.username,
          attributes: b64(p.attributes ?? {}),
          status: p.status,
        },
      })
      expect(res.statusCode, res.body).toBe(200)
      ids.push(res.json().user.id)
    }
    // User create stores null attributes as {}: an update sets them to JSON null.
    const nulled = await t.api.put(`/v1/users/${ids[5]}`, {
      auth: admin,
      form: { attributes: b64(null) },
    })
    expect(nulled.statusCode, nulled.body).toBe(200)
    // A deactivated user stays searchable by its status.
    const gone = await t.api.post('/v1/users', {
      auth: admin,
      form: { username: 'u-gone', attributes: b64({ age: 99 }) },
    })
    ids.push(gone.json().user.id)
    expect(
      (await t.api.delete(`/v1/users/${gone.json().user.id}`, { auth: admin })).statusCode,
    ).toBe(200)
  })
  afterAll(() => t.close())

  it("answers both hit shapes: the SDK's {id, user_id, username, status, attributes} and the spec's {document_id, owner_id, document}", async () => {
    const option = { filter: { '$sys.username': { type: 'eq', value: 'u-alice' } } }
    const plain = await data(option)
    // No attributes in either spelling without full_document.
    expect(plain.documents).toEqual([
      {
        id: ids[0],
        user_id: ids[0],
        username: 'u-alice',
        status: 'ACTIVATED',
        document_id: ids[0],
        owner_id: null,
      },
    ])
    expect(plain.info).toEqual({
      per_page: 100,
      current_page: 1,
      num_pages: 1,
      total_result_count: 1,
    })
    const full = await data({ ...option, full_document: true })
    const hit = full.documents[0] as UserHit
    expect(Object.keys(hit).sort()).toEqual([
      'attributes',
      'document',
      'document_id',
      'id',
      'owner_id',
      'status',
      'user_id',
      'username',
    ])
    expect(unb64(hit.attributes as string)).toEqual(PEOPLE[0]?.attributes)
    expect(hit.document).toBe(hit.attributes)
    expect(hit.document_id).toBe(ids[0])
    expect(hit.owner_id).toBeNull()
  })

  it('filters on system fields ($tv. is an alias of $sys.); users with null attributes never match', async () => {
    expect(await names({ filter: { '$tv.username': ours } })).toEqual([
      'u-alice',
      'u-bob',
      'u-carol',
      'u-dave',
      'u-erin',
      'u-gone',
    ])
    expect(await names({ filter: { '$sys.status': { type: 'eq', value: 'LOCKED' } } })).toEqual([
      'u-carol',
    ])
    const statuses = { type: 'in', value: ['pending', 'deactivated'], case_sensitive: false }
    expect(await names({ filter: { '$sys.status': statuses } })).toEqual(['u-bob', 'u-gone'])
    expect(
      await names({
        filter: { '$sys.username': ours, '$sys.status': { type: 'not', value: 'ACTIVATED' } },
        filter_type: 'and',
      }),
    ).toEqual(['u-bob', 'u-carol', 'u-gone'])
    expect(await names({ filter: { '$sys.id': { type: 'eq', value: ids[3] } } })).toEqual([
      'u-dave',
    ])
    expect(await names({ filter: { '$sys.id': { type: 'eq', value: ids[5] } } })).toEqual([])
    const rows = await t.deps.store.db
      .selectFrom('users')
      .select(['id', 'username', 'created_at'])
      .where('id', 'in', ids)
      .orderBy('id')
      .execute()
    const at = (name: string) => rows.find((r) => r.username === name)?.created_at as string
    const [since, until] = [at('u-carol'), at('u-dave')]
    const expected = rows
      .filter((r) => r.username !== 'u-null' && r.created_at >= since && r.created_at <= until)
      .map((r) => r.username)
    expect(expected).toContain('u-carol')
    const range = { type: 'range', value: { gte: since, lte: until } }
    expect(
      await names({
        filter: { '$sys.created_at': range, '$sys.username': ours },
        filter_type: 'and',
      }),
    ).toEqual(expected)
    const after = { type: 'range', value: { gt: Date.parse(until) } }
    expect(
      await names({
        filter: { '$sys.created_at': after, '$sys.username': ours },
        filter_type: 'and',
      }),
    ).toEqual(
      rows.filter((r) => r.created_at > until && r.username !== 'u-null').map((r) => r.username),
    )
  })

  it('filters and sorts on attributes of the user schema', async () => {
    const and = (filter: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      names({ filter: { '$sys.username': ours, ...filter }, filter_type: 'and', ...extra })
    expect(await and({ email: { type: 'wildcard', value: '*@example.com' } })).toEqual(['u-carol'])
    expect(
      await and({ email: { type: 'wildcard', value: '*@EXAMPLE.COM', case_sensitive: false } }),
    ).toEqual(['u-alice', 'u-carol'])
    expect(await and({ age: { type: 'range', value: { gte: 30 } } })).toEqual([
      'u-alice',
      'u-dave',
      'u-gone',
    ])
    expect(await and({ tags: { type: 'eq', value: 'x' } })).toEqual(['u-carol', 'u-dave'])
    expect(await and({ age: { type: 'not', value: 30 } })).toEqual([
      'u-bob',
      'u-carol',
      'u-dave',
      'u-erin',
      'u-gone',
    ])
    expect(await and({}, { sort: [{ age: 'desc' }, { '$sys.username': 'asc' }] })).toEqual([
      'u-gone',
      'u-dave',
      'u-alice',
      'u-bob',
      'u-carol',
      'u-erin',
    ])
    expect(await and({}, { sort: [{ '$tv.username': 'desc' }], per_page: 2, page: 2 })).toEqual([
      'u-dave',
      'u-carol',
    ])
    // schema_id means nothing here and is ignored.
    expect(await and({}, { schema_id: 'whatever', per_page: 1 })).toEqual(['u-alice'])
  })

  it('follows attribute changes made through the API', async () => {
    const res = await t.api.put(`/v1/users/${ids[4]}`, {
      auth: admin,
      form: { attributes: b64({ email: 'erin@example.com' }) },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(await names({ filter: { email: { type: 'eq', value: 'erin@example.com' } } })).toEqual([
      'u-erin',
    ])
  })

  it('accepts a JSON body holding the raw option', async () => {
    const res = await t.api.post('/v1/users/search', {
      auth: admin,
      json: { filter: { '$sys.username': { type: 'eq', value: 'u-bob' } } },
    })
    expect(searchData<UserHit>(res).documents.map((u) => u.id)).toEqual([ids[1]])
  })

  it('needs some read on users; results and totals hold only readable users', async () => {
    const self = await createUser(t, {
      username: 'p-self',
      policy: [{ Resources: ['User::$[id=self.id]'], Activities: 'R' }],
    })
    const one = await createUser(t, {
      username: 'p-one',
      policy: [{ Resources: [`User::${ids[1]}`], Activities: 'R' }],
    })
    const none = await createUser(t, {
      username: 'p-none',
      policy: [{ Resources: ['Vault::.*'], Activities: 'R' }],
    })
    const everyone = { filter: { '$sys.status': { type: 'not', value: 'nothing' } } }
    const mine = await data(everyone, self.apiKey)
    expect(mine.documents.map((u) => u.username)).toEqual(['p-self'])
    expect(mine.info.total_result_count).toBe(1)
    expect(await names(everyone, one.apiKey)).toEqual(['u-bob'])
    // With full_document, attributes (in both spellings) only of the users the caller may read.
    const fullOne = await data({ ...everyone, full_document: true }, one.apiKey)
    expect(fullOne.documents.map((u) => [u.document_id, unb64(u.document as string)])).toEqual([
      [ids[1], PEOPLE[1]?.attributes],
    ])
    expect((await post(everyone, none.apiKey)).statusCode).toBe(401)
  })

  it('refuses invalid options with a 400 naming the part', async () => {
    const eq = { type: 'eq', value: 'x' }
    const cases: [unknown, RegExp][] = [
      [{ filter: { secret: eq } }, /search_option\.filter\.secret is not an indexed field/],
      [{ filter: { nope: eq } }, /search_option\.filter\.nope is not a field/],
      [{ filter: { '$sys.nope': eq } }, /search_option\.filter\.\$sys\.nope is not a field/],
      [{ filter: { '$sys.created_at': { type: 'eq', value: 'yesterday' } } }, /created_at\.value/],
      [{ filter: { '$sys.created_at': { type: 'wildcard', value: '2*' } } }, /created_at\.type/],
      [{ filter: { email: eq }, sort: [{ '$sys.nope': 'asc' }] }, /search_option\.sort\[0\]/],
      [{ filter: { email: eq }, per_page: 1000 }, /search_option\.per_page/],
      [{ filter: { email: eq }, users: true }, /search_option\.users/],
      [{}, /search_option\.filter is required/],
    ]
    for (const [option, message] of cases) await bad(option, message)
  })
})
