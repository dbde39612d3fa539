import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp, unb64 } from '../helpers/app.js'
import {
  haversineKm,
  insertDocument,
  insertSchema,
  optionForm,
  searchData,
  type TestSchema,
} from '../helpers/search-fixtures.js'

interface Hit {
  document_id: string
  owner_id: string | null
  document?: string
  distance_from?: number
}

const FIELDS: SchemaField[] = [
  { name: 'name', type: 'string', index: true },
  { name: 'age', type: 'integer', index: true },
  { name: 'score', type: 'double', index: true },
  { name: 'active', type: 'boolean', index: true },
  { name: 'born', type: 'date', index: true },
  { name: 'tags', type: 'string', index: true },
  { name: 'nums', type: 'float', index: true },
  { name: 'loc', type: 'geo_point', index: true },
  { name: 'address.city', type: 'string', index: true },
  { name: 'secret', type: 'string', index: false },
]

const NYC = { lat: 40.7128, long: -74.006 }
const NEAR = { lat: 40.73, long: -73.99 }
const LIBERTY = { lat: 40.6892, long: -74.0445 }
const PHILLY = { lat: 39.9526, long: -75.1652 }

// Index in this list = position in creation (id) order.
const CONTENTS: Record<string, unknown>[] = [
  {
    name: 'Alice',
    age: 30,
    score: 1.5,
    active: true,
    born: '1990-05-01',
    tags: ['a', 'b'],
    nums: [1, 10],
    loc: NYC,
    address: { city: 'New York' },
    secret: 'x',
  },
  {
    name: 'bob',
    age: 25,
    score: 2.5,
    active: false,
    born: '1995-01-01T12:00:00Z',
    tags: ['b'],
    nums: [20, 3],
    loc: NEAR,
    address: [{ city: 'Boston' }, { city: 'Austin' }],
  },
  { name: 'Carol', age: 35, active: true, born: '1985-12-31', tags: [], nums: [5], loc: LIBERTY },
  { name: 'dave%_x', age: '40', score: 0, born: 631152000000, loc: PHILLY },
  { name: '50% off [sale]', age: 12.5, active: 'true' },
  { name: 'ALICE', age: 30, active: false },
  {},
  { name: 'a_b', score: -1 },
]
const ALL = [0, 1, 2, 3, 4, 5, 6, 7]

describe('POST /v1/vaults/{id}/search', () => {
  let t: TestApp
  let admin: string
  let vault: string
  let schema: TestSchema
  let docs: string[]
  let owner: Awaited<ReturnType<typeof createUser>>

  const post = (option: unknown, auth = admin, v = vault) =>
    t.api.post(`/v1/vaults/${v}/search`, { auth, multipart: optionForm(option) })
  const hitsOf = async (option: Record<string, unknown>, auth = admin) =>
    searchData<Hit>(await post({ schema_id: schema.id, ...option }, auth))
  /** Positions (in CONTENTS) of the documents found, in result order. */
  const found = async (option: Record<string, unknown>, auth = admin) =>
    (await hitsOf(option, auth)).documents.map((h) => docs.indexOf(h.document_id))
  const filter1 = (field: string, f: Record<string, unknown>) => found({ filter: { [field]: f } })
  const bad = async (option: unknown, message: RegExp, status = 400) => {
    const res: LightMyRequestResponse = await post(option)
    expect(res.statusCode, res.body).toBe(status)
    expect(errorOf(res).message).toMatch(message)
  }

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
    const accountId = t.admin.account_id
    const v = await t.api.post('/v1/vaults', { auth: admin, form: { name: `v-${randomUUID()}` } })
    vault = v.json().vault.id
    schema = await insertSchema(t, accountId, vault, FIELDS)
    owner = await createUser(t, {
      policy: [
        {
          Resources: [`Vault::${vault}::Search::`, `Vault::${vault}::Document::$[Owner=self]`],
          Activities: 'R',
        },
      ],
    })
    docs = []
    for (const [i, content] of CONTENTS.entries()) {
      const ownerId = i < 2 ? owner.id : undefined
      docs.push(
        await insertDocument(t, { accountId, vaultId: vault, schema, content, ...{ ownerId } }),
      )
    }
    // Same field values under another schema and in another vault: never found here.
    const other = await insertSchema(t, accountId, vault, FIELDS)
    await insertDocument(t, { accountId, vaultId: vault, schema: other, content: CONTENTS[0] })
    const v2 = await t.api.post('/v1/vaults', { auth: admin, form: { name: `v-${randomUUID()}` } })
    const s2 = await insertSchema(t, accountId, v2.json().vault.id, FIELDS)
    await insertDocument(t, {
      accountId,
      vaultId: v2.json().vault.id,
      schema: s2,
      content: CONTENTS[0],
    })
  })
  afterAll(() => t.close())

  it('answers the result shape, ids only by default', async () => {
    const data = await hitsOf({ filter: { name: { type: 'eq', value: 'Alice' } } })
    expect(data.info).toEqual({
      per_page: 100,
      current_page: 1,
      num_pages: 1,
      total_result_count: 1,
    })
    expect(data.documents).toEqual([{ document_id: docs[0], owner_id: owner.id }])
  })

  it('eq, not, in and not_in, with case_sensitive per filter and top-level', async () => {
    expect(await filter1('name', { type: 'eq', value: 'Alice' })).toEqual([0])
    expect(await filter1('name', { type: 'eq', value: 'alice', case_sensitive: false })).toEqual([
      0, 5,
    ])
    const ci = { case_sensitive: false }
    expect(await found({ ...ci, filter: { name: { type: 'eq', value: 'alice' } } })).toEqual([0, 5])
    expect(
      await found({
        ...ci,
        filter: { name: { type: 'eq', value: 'alice', case_sensitive: true } },
      }),
    ).toEqual([])
    expect(await filter1('name', { type: 'not', value: 'Alice' })).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(await filter1('name', { type: 'not', value: 'ALICE', ...ci })).toEqual([
      1, 2, 3, 4, 6, 7,
    ])
    expect(await filter1('age', { type: 'eq', value: '30' })).toEqual([0, 5])
    expect(await filter1('age', { type: 'in', value: [25, 35, 40] })).toEqual([1, 2, 3])
    expect(await filter1('age', { type: 'not_in', value: [30, 99] })).toEqual([1, 2, 3, 4, 6, 7])
    expect(await filter1('name', { type: 'in', value: ['ALICE', 'bob'], ...ci })).toEqual([0, 1, 5])
    expect(await filter1('name', { type: 'not_in', value: ['ALICE', 'BOB'], ...ci })).toEqual([
      2, 3, 4, 6, 7,
    ])
    // Booleans: true, "true" and 1-like values compare as booleans; numbers as strings of text.
    expect(await filter1('active', { type: 'eq', value: true })).toEqual([0, 2, 4])
    expect(await filter1('active', { type: 'eq', value: 'false' })).toEqual([1, 5])
    expect(await filter1('active', { type: 'not', value: true })).toEqual([1, 3, 5, 6, 7])
    // Multi-valued fields: arrays of values and arrays of objects on a dotted path.
    expect(await filter1('tags', { type: 'eq', value: 'b' })).toEqual([0, 1])
    expect(await filter1('tags', { type: 'not', value: 'b' })).toEqual([2, 3, 4, 5, 6, 7])
    // A document with several matching values is found (and counted) once.
    const many = await hitsOf({ filter: { tags: { type: 'wildcard', value: '*' } } })
    expect(many.documents.map((h) => docs.indexOf(h.document_id))).toEqual([0, 1])
    expect(many.info.total_result_count).toBe(2)
    expect(await filter1('nums', { type: 'range', value: { gt: 0 } })).toEqual([0, 1, 2])
    expect(await filter1('address.city', { type: 'eq', value: 'Austin' })).toEqual([1])
  })

  it('wildcard: * and ? only, every other character literal, case_sensitive honoured', async () => {
    const w = (value: string, cs = true) =>
      filter1('name', { type: 'wildcard', value, case_sensitive: cs })
    expect(await w('A*')).toEqual([0, 5])
    expect(await w('Al*')).toEqual([0])
    expect(await w('al*', false)).toEqual([0, 5])
    expect(await w('*ALICE', false)).toEqual([0, 5])
    expect(await w('?ob')).toEqual([1])
    expect(await w('*%*')).toEqual([3, 4])
    expect(await w('*_*')).toEqual([3, 7])
    expect(await w('a_b')).toEqual([7])
    expect(await w('a%b')).toEqual([])
    expect(await w('a?b')).toEqual([7])
    expect(await w('*[sale]')).toEqual([4])
    expect(await w('*[*')).toEqual([4])
    expect(await w('50% off ?sale?')).toEqual([4])
    expect(await w('*\\*')).toEqual([])
    expect(await w('*')).toEqual([0, 1, 2, 3, 4, 5, 7])
    expect(await w('')).toEqual([])
  })

  it('range on numbers, dates and strings: one value must satisfy every bound', async () => {
    const r = (field: string, value: unknown, cs = true) =>
      filter1(field, { type: 'range', value, case_sensitive: cs })
    expect(await r('age', { gte: 30, lt: 40 })).toEqual([0, 2, 5])
    expect(await r('age', { gt: 30 })).toEqual([2, 3])
    expect(await r('score', { gt: 0 })).toEqual([0, 1])
    expect(await r('score', { lte: '0' })).toEqual([3, 7])
    expect(await r('nums', { gt: 2, lt: 5 })).toEqual([1])
    expect(await r('born', { gte: '1990-01-01' })).toEqual([0, 1, 3])
    expect(await r('born', { lt: 631152000000 })).toEqual([2])
    expect(await r('born', { gte: '1990-01-01T00:00:00.001Z' })).toEqual([0, 1])
    expect(await r('born', { gt: '1994-12-31T23:00:00-02:00', lte: '1995-01-01' })).toEqual([])
    expect(await r('name', { gte: 'B', lt: 'c' })).toEqual([1, 2, 7])
    expect(await r('name', { gte: 'b', lt: 'c' }, false)).toEqual([1])
  })

  it('and / or, with negations', async () => {
    const both = { active: { type: 'eq', value: true }, age: { type: 'range', value: { gte: 30 } } }
    expect(await found({ filter: both, filter_type: 'and' })).toEqual([0, 2])
    expect(await found({ filter: both })).toEqual([0, 2, 3, 4, 5])
    const notAlice = { type: 'not', value: 'Alice' }
    const active = { type: 'eq', value: true }
    expect(await found({ filter: { name: notAlice, active }, filter_type: 'and' })).toEqual([2, 4])
    const eqAlice = { type: 'eq', value: 'Alice' }
    const not30 = { type: 'not', value: 30 }
    expect(await found({ filter: { name: eqAlice, age: not30 }, filter_type: 'or' })).toEqual([
      0, 1, 2, 3, 4, 6, 7,
    ])
    expect(await found({ filter: { name: notAlice, age: not30 } })).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(await found({ filter: { name: notAlice, age: not30 }, filter_type: 'and' })).toEqual([
      1, 2, 3, 4, 6, 7,
    ])
  })

  it('geo_distance filter, sort and distance_from in km and mi', async () => {
    const geo = (distance: number, unit: string) => ({
      loc: { type: 'geo_distance', value: { ...NYC, distance, unit } },
    })
    expect(await found({ filter: geo(10, 'km') })).toEqual([0, 1, 2])
    expect(await found({ filter: geo(100, 'mi') })).toEqual([0, 1, 2, 3])
    expect(await found({ filter: geo(160.934, 'km') })).toEqual([0, 1, 2, 3])
    expect(await found({ filter: geo(2, 'km') })).toEqual([0])
    const points = [NYC, NEAR, LIBERTY, PHILLY]
    for (const unit of ['km', 'mi']) {
      const radius = unit === 'km' ? 160 : 100
      const asc = await hitsOf({ filter: geo(radius, unit), sort: [{ loc: 'asc' }] })
      const order = asc.documents.map((h) => docs.indexOf(h.document_id))
      expect(order).toEqual([0, 1, 2, 3])
      asc.documents.forEach((h, i) => {
        const km = haversineKm(NYC, points[order[i] as number] as typeof NYC)
        expect(h.distance_from).toBeCloseTo(unit === 'km' ? km : km / 1.609344, 6)
      })
      const desc = await found({ filter: geo(radius, unit), sort: [{ loc: 'desc' }] })
      expect(desc).toEqual([3, 2, 1, 0])
    }
    // With `or`, a match without a point sorts last and has no distance_from.
    const mixed = await hitsOf({
      filter: { ...geo(10, 'km'), name: { type: 'eq', value: 'ALICE' } },
      sort: [{ loc: 'asc' }],
      full_doc: true,
    })
    expect(mixed.documents.map((h) => docs.indexOf(h.document_id))).toEqual([0, 1, 2, 5])
    expect(mixed.documents[3]?.distance_from).toBeUndefined()
    expect(unb64(mixed.documents[3]?.document as string)).toEqual(CONTENTS[5])
  })

  it('sorts by several keys: min for asc, max for desc, missing values last', async () => {
    const all = { name: { type: 'not', value: 'zzz' } }
    expect(await found({ filter: all })).toEqual(ALL)
    expect(await found({ filter: all, sort: [{ active: 'desc' }, { age: 'asc' }] })).toEqual([
      0, 2, 4, 1, 5, 3, 6, 7,
    ])
    expect(await found({ filter: all, sort: [{ name: 'asc' }] })).toEqual([4, 5, 0, 2, 7, 1, 3, 6])
    expect(await found({ filter: all, sort: [{ name: 'desc' }] })).toEqual([3, 1, 7, 2, 0, 5, 4, 6])
    expect(await found({ filter: all, sort: [{ nums: 'asc' }] })).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(await found({ filter: all, sort: [{ nums: 'desc' }] })).toEqual([1, 0, 2, 3, 4, 5, 6, 7])
    expect(await found({ filter: all, sort: [{ born: 'asc' }] })).toEqual([2, 3, 0, 1, 4, 5, 6, 7])
    expect(await found({ filter: all, sort: [{ score: 'desc' }] })).toEqual([
      1, 0, 3, 7, 2, 4, 5, 6,
    ])
  })

  it('pages within the 500-result window', async () => {
    const all = { name: { type: 'not', value: 'zzz' } }
    const p1 = await hitsOf({ filter: all, per_page: 3 })
    expect(p1.documents.map((h) => docs.indexOf(h.document_id))).toEqual([0, 1, 2])
    expect(p1.info).toEqual({ per_page: 3, current_page: 1, num_pages: 3, total_result_count: 8 })
    expect(await found({ filter: all, per_page: 3, page: 3 })).toEqual([6, 7])
    const beyond = await hitsOf({ filter: all, per_page: 3, page: 4 })
    expect(beyond.documents).toEqual([])
    expect(beyond.info.total_result_count).toBe(8)
    expect(await found({ filter: all, per_page: 250, page: 2 })).toEqual([])
    const none = await hitsOf({ filter: { name: { type: 'eq', value: 'nobody' } } })
    expect(none.info).toEqual({
      per_page: 100,
      current_page: 1,
      num_pages: 0,
      total_result_count: 0,
    })
    await bad({ schema_id: schema.id, filter: all, per_page: 200, page: 3 }, /search_option\.page/)
    await bad({ schema_id: schema.id, filter: all, page: 6 }, /search_option\.page/)
  })

  it('full_document (or full_doc) returns the base64 content', async () => {
    for (const key of ['full_document', 'full_doc']) {
      const data = await hitsOf({ filter: { age: { type: 'eq', value: 30 } }, [key]: true })
      expect(data.documents.map((h) => unb64(h.document as string))).toEqual([
        CONTENTS[0],
        CONTENTS[5],
      ])
      expect(data.documents[1]?.owner_id).toBeNull()
    }
  })

  it('accepts multipart, urlencoded, and a JSON body holding the raw option', async () => {
    const option = { schema_id: schema.id, filter: { name: { type: 'eq', value: 'bob' } } }
    const url = `/v1/vaults/${vault}/search`
    for (const body of [
      { form: optionForm(option) },
      { json: option },
      { json: { search_option: b64(option) } },
    ]) {
      const data = searchData<Hit>(await t.api.post(url, { auth: admin, ...body }))
      expect(data.documents.map((h) => h.document_id)).toEqual([docs[1]])
    }
  })

  it('needs R on Search and some read on the documents; results and totals are limited', async () => {
    const all = { schema_id: schema.id, filter: { name: { type: 'not', value: 'zzz' } } }
    const readOnly = await createUser(t, {
      policy: [{ Resources: [`Vault::${vault}::Document::.*`], Activities: 'R' }],
    })
    const searchOnly = await createUser(t, {
      policy: [{ Resources: [`Vault::${vault}::Search::`], Activities: 'R' }],
    })
    const nobody = await createUser(t)
    for (const u of [readOnly, searchOnly, nobody]) {
      const res = await post(all, u.apiKey)
      expect(res.statusCode, res.body).toBe(401)
    }
    const owned = searchData<Hit>(await post(all, owner.apiKey))
    expect(owned.documents.map((h) => docs.indexOf(h.document_id))).toEqual([0, 1])
    expect(owned.info.total_result_count).toBe(2)
    const anyVault = await createUser(t, {
      policy: [
        { Resources: ['Vault::.*::Search::', `Vault::${vault}::Document::.*`], Activities: 'R' },
      ],
    })
    expect(searchData<Hit>(await post(all, anyVault.apiKey)).info.total_result_count).toBe(8)
  })

  it('answers 404 for an unknown vault or schema and 400 for a bad vault id', async () => {
    const option = { schema_id: randomUUID(), filter: { name: { type: 'eq', value: 'x' } } }
    await bad(option, /Schema not found/, 404)
    const res = await post({ ...option, schema_id: schema.id }, admin, randomUUID())
    expect(res.statusCode).toBe(404)
    expect((await post({ ...option, schema_id: schema.id }, admin, 'nope')).statusCode).toBe(400)
  })

  it('refuses invalid options with a 400 naming the part', async () => {
    const url = `/v1/vaults/${vault}/search`
    const raw = (form: Record<string, string>) => t.api.post(url, { auth: admin, form })
    for (const [form, message] of [
      [{}, /search_option is required/],
      [{ search_option: '%%%' }, /search_option must be base64/],
      [{ search_option: b64([1]) }, /search_option must be a JSON object/],
    ] as const) {
      const res = await raw(form)
      expect(res.statusCode, res.body).toBe(400)
      expect(errorOf(res).message).toMatch(message)
    }
    const s = schema.id
    const f = (field: string, filter: unknown, extra: Record<string, unknown> = {}) => ({
      schema_id: s,
      filter: { [field]: filter },
      ...extra,
    })
    const eq = { type: 'eq', value: 'x' }
    const cases: [unknown, RegExp][] = [
      [{ filter: { name: eq } }, /search_option\.schema_id is required/],
      [{ schema_id: 'abc', filter: { name: eq } }, /search_option\.schema_id must be a UUID/],
      [f('name', eq, { foo: 1 }), /search_option\.foo/],
      [{ schema_id: s }, /search_option\.filter is required/],
      [{ schema_id: s, filter: {} }, /search_option\.filter must have/],
      [{ schema_id: s, filter: [] }, /search_option\.filter must be/],
      [f('name', 'x'), /search_option\.filter\.name must be an object/],
      [f('name', { type: 'like', value: 'x' }), /search_option\.filter\.name\.type/],
      [f('name', { ...eq, extra: 1 }), /search_option\.filter\.name\.extra/],
      [f('name', { type: 'eq' }), /search_option\.filter\.name\.value is required/],
      [f('name', { type: 'eq', value: null }), /search_option\.filter\.name\.value/],
      [f('nope', eq), /search_option\.filter\.nope is not a field/],
      [f('$sys.id', eq), /search_option\.filter\.\$sys\.id is not a field/],
      [f('secret', eq), /search_option\.filter\.secret is not an indexed field/],
      [
        f('age', { type: 'eq', value: 'abc' }),
        /search_option\.filter\.age\.value must be an integ/,
      ],
      [f('age', { type: 'eq', value: 30.5 }), /search_option\.filter\.age\.value must be an integ/],
      [f('born', { type: 'eq', value: '2030-02-31' }), /search_option\.filter\.born\.value must/],
      [f('age', { type: 'in', value: [] }), /search_option\.filter\.age\.value must be a non-e/],
      [f('age', { type: 'in', value: [1, {}] }), /search_option\.filter\.age\.value\[1\]/],
      [f('age', { type: 'in', value: [1, 'x'] }), /search_option\.filter\.age\.value\[1\]/],
      [f('age', { type: 'not_in', value: Array(1001).fill(1) }), /filter\.age\.value must/],
      [f('age', { type: 'wildcard', value: '1*' }), /search_option\.filter\.age\.type/],
      [f('name', { type: 'wildcard', value: 'x'.repeat(1001) }), /filter\.name\.value/],
      [
        f('name', { type: 'geo_distance', value: { ...NYC, distance: 1, unit: 'km' } }),
        /name\.type/,
      ],
      [f('loc', eq), /search_option\.filter\.loc\.type/],
      [f('active', { type: 'range', value: { gt: 0 } }), /search_option\.filter\.active\.type/],
      [f('age', { type: 'range', value: {} }), /search_option\.filter\.age\.value must have/],
      [f('age', { type: 'range', value: { from: 1 } }), /search_option\.filter\.age\.value\.from/],
      [f('born', { type: 'range', value: { gte: 'soon' } }), /filter\.born\.value\.gte must/],
      [f('name', { ...eq, case_sensitive: 1 }), /search_option\.filter\.name\.case_sensitive/],
      [f('name', eq, { case_sensitive: 'no' }), /search_option\.case_sensitive/],
      [f('name', eq, { filter_type: 'xor' }), /search_option\.filter_type/],
      [f('name', eq, { page: 0 }), /search_option\.page/],
      [f('name', eq, { page: 1.5 }), /search_option\.page/],
      [f('name', eq, { page: '2' }), /search_option\.page/],
      [f('name', eq, { per_page: 501 }), /search_option\.per_page/],
      [f('name', eq, { per_page: 0 }), /search_option\.per_page/],
      [f('name', eq, { full_document: 'yes' }), /search_option\.full_document/],
      [f('name', eq, { sort: { name: 'asc' } }), /search_option\.sort must be an array/],
      [f('name', eq, { sort: [{ name: 'up' }] }), /search_option\.sort\[0\]\.name must be asc/],
      [f('name', eq, { sort: [{ name: 'asc', age: 'asc' }] }), /search_option\.sort\[0\] must/],
      [f('name', eq, { sort: [{ nope: 'asc' }] }), /search_option\.sort\[0\]\.nope is not a f/],
      [f('name', eq, { sort: [{ secret: 'asc' }] }), /search_option\.sort\[0\]\.secret is not/],
      [f('name', eq, { sort: [{ loc: 'asc' }] }), /search_option\.sort\[0\]\.loc needs a geo/],
    ]
    const geo = (value: Record<string, unknown>) =>
      f('loc', { type: 'geo_distance', value: { ...NYC, distance: 1, unit: 'km', ...value } })
    cases.push(
      [geo({ distance: 100.01, unit: 'mi' }), /search_option\.filter\.loc\.value\.distance/],
      [geo({ distance: 160.94 }), /search_option\.filter\.loc\.value\.distance/],
      [geo({ distance: 0 }), /search_option\.filter\.loc\.value\.distance/],
      [geo({ distance: '5' }), /search_option\.filter\.loc\.value\.distance/],
      [geo({ lat: 91 }), /search_option\.filter\.loc\.value\.lat/],
      [geo({ long: -180.5 }), /search_option\.filter\.loc\.value\.long/],
      [geo({ unit: 'm' }), /search_option\.filter\.loc\.value\.unit/],
      [geo({ radius: 1 }), /search_option\.filter\.loc\.value\.radius/],
      [f('loc', { type: 'geo_distance', value: NYC }), /search_option\.filter\.loc\.value\.unit/],
    )
    for (const [option, message] of cases) await bad(option, message)
  })
})

describe('vault search over documents written through the API', () => {
  let t: TestApp
  afterAll(() => t.close())

  it('sees creates, updates, schema changes and deletes', async () => {
    t = await buildTestApp()
    const auth = t.admin.api_key
    const v = await t.api.post('/v1/vaults', { auth, form: { name: 'people' } })
    const vault = v.json().vault.id as string
    const fields = [
      { name: 'name', type: 'string', index: true },
      { name: 'age', type: 'integer', index: true },
    ]
    const s = await t.api.post(`/v1/vaults/${vault}/schemas`, {
      auth,
      form: { schema: b64({ name: 'person', fields }) },
    })
    expect(s.statusCode, s.body).toBe(200)
    const schemaId = s.json().schema.id as string
    const create = async (document: unknown) => {
      const res = await t.api.post(`/v2/vaults/${vault}/documents`, {
        auth,
        json: { document, schema_id: schemaId },
      })
      expect(res.statusCode, res.body).toBe(200)
      return res.json().document.id as string
    }
    const a = await create({ name: 'Ann', age: 40 })
    const b = await create({ name: 'Ben', age: 20 })
    const search = async (filter: Record<string, unknown>) => {
      const res = await t.api.post(`/v1/vaults/${vault}/search`, {
        auth,
        form: optionForm({ schema_id: schemaId, filter, sort: [{ age: 'asc' }] }),
      })
      return searchData<Hit>(res).documents.map((h) => h.document_id)
    }
    const adults = { age: { type: 'range', value: { gte: 18 } } }
    expect(await search(adults)).toEqual([b, a])
    await t.api.put(`/v2/vaults/${vault}/documents/${b}`, {
      auth,
      json: { document: { name: 'Ben', age: 10 } },
    })
    expect(await search(adults)).toEqual([a])
    expect(await search({ name: { type: 'not', value: 'Ann' } })).toEqual([b])
    await t.api.put(`/v2/vaults/${vault}/documents/${b}`, {
      auth,
      json: { document: { name: 'Ben', age: 30 }, schema_id: null },
    })
    expect(await search({ name: { type: 'not', value: 'Ann' } })).toEqual([])
    await t.api.delete(`/v1/vaults/${vault}/documents/${a}`, { auth })
    expect(await search(adults)).toEqual([])
  })
})
