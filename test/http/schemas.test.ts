import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp, unb64 } from '../helpers/app.js'
import { optionForm, searchData } from '../helpers/search-fixtures.js'

interface SchemaBody {
  id: string
  vault_id: string
  name: string
  fields: { name: string; type: string; index: boolean }[]
}

interface Hit {
  document_id: string
  owner_id: string | null
  document?: string
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const MISSING = '00000000-0000-4000-8000-000000000000'

let seq = 0
const uniqueName = (prefix = 's') => `${prefix}-${++seq}-${randomUUID().slice(0, 8)}`

function schemaOf(res: LightMyRequestResponse): SchemaBody {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  expect(body.transaction_id).toMatch(UUID)
  return body.schema as SchemaBody
}

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp) {
  expect(res.statusCode, res.body).toBe(status)
  const error = errorOf(res)
  if (message) expect(error.message).toMatch(message)
  return error
}

describe('vault schemas', () => {
  let t: TestApp
  let admin: string

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
  })
  afterAll(() => t.close())

  const newVault = async (auth = admin) => {
    const res = await t.api.post('/v1/vaults', { auth, form: { name: uniqueName('vault') } })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().vault.id as string
  }
  const postSchema = (vault: string, def: unknown, auth = admin) =>
    t.api.post(`/v1/vaults/${vault}/schemas`, { auth, form: { schema: b64(def) } })
  const create = async (vault: string, def: unknown, auth = admin) =>
    schemaOf(await postSchema(vault, def, auth))
  const putSchema = (vault: string, id: string, def: unknown, auth = admin) =>
    t.api.put(`/v1/vaults/${vault}/schemas/${id}`, { auth, form: { schema: b64(def) } })
  const read = (vault: string, id: string, auth = admin) =>
    t.api.get(`/v1/vaults/${vault}/schemas/${id}`, { auth })
  const list = async (vault: string, auth = admin) => {
    const res = await t.api.get(`/v1/vaults/${vault}/schemas`, { auth })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().schemas as SchemaBody[]
  }
  /** A v2 document, optionally tied to a schema; returns its id. */
  const createDoc = async (vault: string, document: unknown, schemaId?: string, auth = admin) => {
    const res = await t.api.post(`/v2/vaults/${vault}/documents`, {
      auth,
      json: { document, ...(schemaId ? { schema_id: schemaId } : {}) },
    })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().document.id as string
  }
  const searchRes = (vault: string, option: Record<string, unknown>, auth = admin) =>
    t.api.post(`/v1/vaults/${vault}/search`, { auth, multipart: optionForm(option) })
  /** Ids matching one filter (in creation order). */
  const found = async (vault: string, schemaId: string, filter: Record<string, unknown>) =>
    searchData<Hit>(await searchRes(vault, { schema_id: schemaId, filter }))
      .documents.map((d) => d.document_id)
      .sort()
  const eq = (value: unknown) => ({ type: 'eq', value })
  const schemaDocs = async (vault: string, schemaId: string) => {
    const res = await t.api.get(`/v1/vaults/${vault}/schemas/${schemaId}/documents`, {
      auth: admin,
    })
    expect(res.statusCode, res.body).toBe(200)
    return (res.json().data.items as { id: string }[]).map((d) => d.id).sort()
  }
  const userWith = (policy: PolicyStatement[]) => createUser(t, { policy })

  describe('POST /v1/vaults/{id}/schemas', () => {
    it('creates from an urlencoded form and answers {id, vault_id, name, fields}', async () => {
      const vault = await newVault()
      const fields = [
        { name: 'name', type: 'string', index: true },
        { name: 'age', type: 'integer', index: false },
      ]
      const schema = await create(vault, { name: 'person', fields })
      expect(Object.keys(schema).sort()).toEqual(['fields', 'id', 'name', 'vault_id'])
      expect(schema).toEqual({
        id: expect.stringMatching(UUID),
        vault_id: vault,
        name: 'person',
        fields,
      })
      expect(schemaOf(await read(vault, schema.id))).toEqual(schema)
    })

    it('accepts a multipart form (the official SDK) and query-string parameters', async () => {
      const vault = await newVault()
      const fields = [{ name: 'a', type: 'string', index: true }]
      const multi = schemaOf(
        await t.api.post(`/v1/vaults/${vault}/schemas`, {
          auth: admin,
          multipart: { schema: b64({ name: 'multi', fields }) },
        }),
      )
      expect(multi).toMatchObject({ name: 'multi', fields })
      const query = schemaOf(
        await t.api.post(`/v1/vaults/${vault}/schemas`, {
          auth: admin,
          query: { schema: b64({ name: 'query', fields }) },
        }),
      )
      expect(query).toMatchObject({ name: 'query', fields })
      // Ruby's encoder wraps base64 lines: whitespace inside the value is tolerated.
      const wrapped = b64({ name: 'wrapped-schema-with-a-long-enough-name', fields }).replace(
        /(.{20})/g,
        '$1\n',
      )
      const ruby = schemaOf(
        await t.api.post(`/v1/vaults/${vault}/schemas`, { auth: admin, form: { schema: wrapped } }),
      )
      expect(ruby.name).toBe('wrapped-schema-with-a-long-enough-name')
      expect((await list(vault)).map((s) => s.name)).toEqual([
        'multi',
        'query',
        'wrapped-schema-with-a-long-enough-name',
      ])
    })

    it('accepts every type, dotted names, one geo_point; type defaults to string, index to true', async () => {
      const vault = await newVault()
      const types = ['string', 'integer', 'long', 'float', 'double', 'boolean', 'date', 'geo_point']
      const schema = await create(vault, {
        name: 'types',
        fields: [
          ...types.map((type) => ({ name: `f_${type}`, type, index: true })),
          { name: 'address.city', type: 'string', index: true },
          { name: 'untyped', index: false },
          { name: 'bare' },
        ],
      })
      expect(schema.fields).toEqual([
        ...types.map((type) => ({ name: `f_${type}`, type, index: true })),
        { name: 'address.city', type: 'string', index: true },
        { name: 'untyped', type: 'string', index: false },
        { name: 'bare', type: 'string', index: true },
      ])
    })

    it('accepts index as 1/0, "true"/"false", "1"/"0" and booleans, and returns booleans', async () => {
      const vault = await newVault()
      const forms: [unknown, boolean][] = [
        [1, true],
        [0, false],
        ['true', true],
        ['false', false],
        ['1', true],
        ['0', false],
        [true, true],
        [false, false],
      ]
      const schema = await create(vault, {
        name: 'flags',
        fields: forms.map(([index], i) => ({ name: `f${i}`, type: 'string', index })),
      })
      expect(schema.fields.map((f) => f.index)).toEqual(forms.map(([, b]) => b))
      for (const f of schema.fields) expect(typeof f.index).toBe('boolean')
      const again = schemaOf(await read(vault, schema.id))
      expect(again.fields).toEqual(schema.fields)
    })

    it('refuses an invalid definition with a 400 naming the problem, and creates nothing', async () => {
      const vault = await newVault()
      const f = (...fields: unknown[]) => ({ name: 'x', fields })
      const cases: [Record<string, string> | undefined, RegExp][] = [
        [{}, /^schema is required/],
        [{ schema: '' }, /^schema is required/],
        [{ schema: 'not base64!' }, /^schema must be base64-encoded JSON/],
        [{ schema: Buffer.from('{"name":').toString('base64') }, /^schema must be base64/],
        [{ schema: b64([]) }, /^schema must be a JSON object with name and fields/],
        [{ schema: b64(null) }, /^schema must be a JSON object/],
        [{ schema: b64({ fields: [] }) }, /^schema name is required/],
        [{ schema: b64({ name: '  ', fields: [] }) }, /^schema name is required/],
        [{ schema: b64({ name: 7, fields: [] }) }, /^schema name is required/],
        [
          { schema: b64({ name: 'n'.repeat(256), fields: [] }) },
          /^schema name must be at most 255/,
        ],
        [{ schema: b64({ name: 'x', fields: 'a' }) }, /^schema fields must be an array/],
        [{ schema: b64({ name: 'x', fields: { a: 1 } }) }, /^schema fields must be an array/],
        [{ schema: b64(f('a')) }, /^schema fields\[0\] must be an object/],
        [
          { schema: b64(f({ name: 'a' }, { type: 'string' })) },
          /^schema fields\[1\]\.name is required/,
        ],
        [{ schema: b64(f({ name: '' })) }, /^schema fields\[0\]\.name is required/],
        [{ schema: b64(f({ name: 'n'.repeat(256) })) }, /fields\[0\]\.name must be at most 255/],
        [
          { schema: b64(f({ name: 'a', type: 'text' })) },
          /^schema fields\[0\]\.type must be one of string, integer, long, float, double, boolean, date, geo_point/,
        ],
        [{ schema: b64(f({ name: 'a', type: 'String' })) }, /fields\[0\]\.type must be one of/],
        [
          {
            schema: b64(
              f(
                { name: 'home', type: 'geo_point', index: true },
                { name: 'work', type: 'geo_point', index: false },
              ),
            ),
          },
          /^schema may hold at most one geo_point field/,
        ],
        [
          { schema: b64(f({ name: 'first_name' }, { name: 'First_Name' })) },
          /^schema fields\[1\]\.name "First_Name" is used twice \(names are unique ignoring case\)/,
        ],
        [
          { schema: b64(f({ name: 'a', index: 'yes' })) },
          /^schema fields\[0\]\.index must be a boolean/,
        ],
        [{ schema: b64(f({ name: 'a', index: 2 })) }, /fields\[0\]\.index must be a boolean/],
        [{ schema: b64(f({ name: 'a', index: null })) }, /fields\[0\]\.index must be a boolean/],
        [
          { schema: b64(f({ name: '$sys.id' })) },
          /^schema fields\[0\]\.name must not use the reserved prefix/,
        ],
        [
          { schema: b64(f({ name: '$tv.username' })) },
          /fields\[0\]\.name must not use the reserved/,
        ],
        [
          { schema: b64(f({ name: 'a..b' })) },
          /^schema fields\[0\]\.name must not have empty path segments/,
        ],
        [{ schema: b64(f({ name: '.a' })) }, /fields\[0\]\.name must not have empty path segments/],
        [{ schema: b64(f({ name: 'a.' })) }, /fields\[0\]\.name must not have empty path segments/],
        [
          {
            schema: b64({
              name: 'x',
              fields: Array.from({ length: 201 }, (_, i) => ({ name: `f${i}` })),
            }),
          },
          /^schema fields may hold at most 200 fields/,
        ],
      ]
      for (const [form, message] of cases) {
        const res = await t.api.post(`/v1/vaults/${vault}/schemas`, {
          auth: admin,
          ...(form ? { form } : {}),
        })
        const error = expectError(res, 400, message)
        expect(error.code, res.body).toBe('INVALID_PARAMETER')
        expect(error.type).toBe('invalid_request_error')
      }
      expect(await list(vault)).toEqual([])
      // `$sys` alone, or inside a path, is an ordinary name.
      const ok = await create(vault, {
        name: 'ok',
        fields: [{ name: 'a.$sys' }, { name: 'sys.id' }],
      })
      expect(ok.fields.map((x) => x.name)).toEqual(['a.$sys', 'sys.id'])
    })

    it('refuses a name used in the vault (ignoring case) but allows it in another vault', async () => {
      const vault = await newVault()
      const other = await newVault()
      await create(vault, { name: 'Patients', fields: [] })
      for (const name of ['Patients', 'patients', 'PATIENTS']) {
        const res = await postSchema(vault, { name, fields: [] })
        const error = expectError(res, 400, /^schema name is already used by another schema/)
        expect(error.code).toBe('INVALID_PARAMETER')
      }
      const there = await create(other, { name: 'patients', fields: [] })
      expect(there.vault_id).toBe(other)
      expect((await list(vault)).map((s) => s.name)).toEqual(['Patients'])
    })

    it('answers 404 for an unknown vault, 400 for a malformed vault id, 401 without credentials', async () => {
      expectError(await postSchema(MISSING, { name: 'x', fields: [] }), 404, /Vault not found/)
      expectError(await postSchema('not-a-uuid', { name: 'x', fields: [] }), 400, /vault_id/)
      const anon = await t.api.post(`/v1/vaults/${MISSING}/schemas`, {
        form: { schema: b64({ name: 'x', fields: [] }) },
      })
      expectError(anon, 401)
      // Another account's vault is unknown here.
      const other = await t.newAccount()
      const theirs = await newVault(other.api_key)
      expectError(await postSchema(theirs, { name: 'x', fields: [] }), 404)
    })
  })

  describe('GET /v1/vaults/{id}/schemas[/{schema_id}]', () => {
    it('reads a schema; 404 for an unknown id, a schema of another vault, an unknown vault', async () => {
      const vault = await newVault()
      const other = await newVault()
      const schema = await create(vault, { name: 'a', fields: [{ name: 'x', type: 'integer' }] })
      expect(schemaOf(await read(vault, schema.id.toUpperCase()))).toEqual(schema)
      expectError(await read(vault, MISSING), 404, /Schema not found/)
      expectError(await read(other, schema.id), 404, /Schema not found/)
      expectError(await read(MISSING, schema.id), 404)
      expectError(await read(vault, 'nope'), 400, /schema_id/)
    })

    it('lists every schema in creation order, each with id, vault_id, name and fields', async () => {
      const vault = await newVault()
      expect(await list(vault)).toEqual([])
      const a = await create(vault, { name: 'a', fields: [{ name: 'x', type: 'date', index: 0 }] })
      const b = await create(vault, { name: 'b', fields: [] })
      await create(await newVault(), { name: 'elsewhere', fields: [] })
      expect(await list(vault)).toEqual([a, b])
      expectError(await t.api.get(`/v1/vaults/${MISSING}/schemas`, { auth: admin }), 404)
    })

    it('lists only the schemas the caller may read; no read at all is a 401', async () => {
      const vault = await newVault()
      const s1 = await create(vault, { name: 's1', fields: [] })
      const s2 = await create(vault, { name: 's2', fields: [] })
      const one = await userWith([
        { Resources: [`Vault::${vault}::Schema::${s1.id}`], Activities: 'R' },
      ])
      expect(await list(vault, one.apiKey)).toEqual([s1])
      expect(schemaOf(await read(vault, s1.id, one.apiKey))).toEqual(s1)
      expectError(await read(vault, s2.id, one.apiKey), 401)
      const all = await userWith([{ Resources: [`Vault::${vault}::Schema::.*`], Activities: 'R' }])
      expect(await list(vault, all.apiKey)).toEqual([s1, s2])
      // Read rights on the vault itself or on its documents are not rights on its schemas.
      const none = await userWith([
        { Resources: [`Vault::${vault}`, `Vault::${vault}::Document::.*`], Activities: 'R' },
        { Resources: [`Vault::${vault}::Schema::.*`], Activities: 'CUD' },
      ])
      expectError(await t.api.get(`/v1/vaults/${vault}/schemas`, { auth: none.apiKey }), 401)
      expectError(await read(vault, s1.id, none.apiKey), 401)
      // A grant in another vault is not one here.
      const elsewhere = await userWith([
        { Resources: [`Vault::${MISSING}::Schema::.*`], Activities: 'R' },
      ])
      expectError(await t.api.get(`/v1/vaults/${vault}/schemas`, { auth: elsewhere.apiKey }), 401)
      expectError(await t.api.get(`/v1/vaults/${vault}/schemas`), 401)
    })
  })

  describe('PUT /v1/vaults/{id}/schemas/{schema_id}', () => {
    it('replaces name and fields exactly (multipart and query string too)', async () => {
      const vault = await newVault()
      const schema = await create(vault, {
        name: 'before',
        fields: [
          { name: 'a', type: 'string', index: true },
          { name: 'b', type: 'integer', index: true },
        ],
      })
      const fields = [{ name: 'c', type: 'double', index: false }]
      const updated = schemaOf(await putSchema(vault, schema.id, { name: 'after', fields }))
      expect(updated).toEqual({ id: schema.id, vault_id: vault, name: 'after', fields })
      expect(schemaOf(await read(vault, schema.id))).toEqual(updated)
      const multi = schemaOf(
        await t.api.put(`/v1/vaults/${vault}/schemas/${schema.id}`, {
          auth: admin,
          multipart: { schema: b64({ name: 'multi', fields: [{ name: 'd', index: 1 }] }) },
        }),
      )
      expect(multi.fields).toEqual([{ name: 'd', type: 'string', index: true }])
      const query = schemaOf(
        await t.api.put(`/v1/vaults/${vault}/schemas/${schema.id}`, {
          auth: admin,
          query: { schema: b64({ name: 'query', fields: [] }) },
        }),
      )
      expect(query).toEqual({ id: schema.id, vault_id: vault, name: 'query', fields: [] })
    })

    it('validates like create; a name of another schema is refused, its own in another case is not', async () => {
      const vault = await newVault()
      const a = await create(vault, { name: 'alpha', fields: [{ name: 'x' }] })
      await create(vault, { name: 'beta', fields: [] })
      expectError(
        await putSchema(vault, a.id, { name: 'alpha', fields: [{ name: 'x' }, { name: 'X' }] }),
        400,
        /is used twice/,
      )
      expectError(
        await putSchema(vault, a.id, { name: 'alpha', fields: [{ name: '$sys.x' }] }),
        400,
        /reserved/,
      )
      expectError(await putSchema(vault, a.id, { fields: [] }), 400, /^schema name is required/)
      expectError(
        await t.api.put(`/v1/vaults/${vault}/schemas/${a.id}`, { auth: admin }),
        400,
        /^schema is required/,
      )
      expectError(
        await putSchema(vault, a.id, { name: 'BETA', fields: [] }),
        400,
        /name is already used/,
      )
      expect(schemaOf(await read(vault, a.id))).toEqual(a)
      expect(schemaOf(await putSchema(vault, a.id, { name: 'ALPHA', fields: [] })).name).toBe(
        'ALPHA',
      )
      expectError(
        await putSchema(vault, MISSING, { name: 'z', fields: [] }),
        404,
        /Schema not found/,
      )
      expectError(await putSchema(await newVault(), a.id, { name: 'z', fields: [] }), 404)
    })

    it('allows fields: [] on a schema with documents (as the SDK suite does); documents stay', async () => {
      const vault = await newVault()
      const schema = await create(vault, {
        name: 'docs',
        fields: [{ name: 'foo', type: 'string', index: true }],
      })
      const d1 = await createDoc(vault, { foo: 'bar' }, schema.id)
      const d2 = await createDoc(vault, { foo: 'baz' }, schema.id)
      expect(await found(vault, schema.id, { foo: eq('bar') })).toEqual([d1])
      const renamed = schemaOf(await putSchema(vault, schema.id, { name: 'renamed', fields: [] }))
      expect(renamed).toEqual({ id: schema.id, vault_id: vault, name: 'renamed', fields: [] })
      // A renamed schema keeps its documents.
      expect(await schemaDocs(vault, schema.id)).toEqual([d1, d2].sort())
      const docs = await t.api.get(`/v2/vaults/${vault}/documents/${d1},${d2}`, { auth: admin })
      expect(docs.json().documents.map((d: { schema_id: string }) => d.schema_id)).toEqual([
        schema.id,
        schema.id,
      ])
      // foo is no longer indexed: filtering on it is a 400 naming it.
      expectError(
        await searchRes(vault, { schema_id: schema.id, filter: { foo: eq('bar') } }),
        400,
        /foo/,
      )
    })

    it('re-indexes the documents: added, removed and re-typed fields change what matches', async () => {
      const vault = await newVault()
      const schema = await create(vault, {
        name: 'people',
        fields: [{ name: 'name', type: 'string', index: true }],
      })
      const a = await createDoc(
        vault,
        { name: 'Ann', city: 'Oslo', code: 7, born: '1990-01-02' },
        schema.id,
      )
      const b = await createDoc(vault, { name: 'Bob', city: 'Rome', code: '007' }, schema.id)
      const c = await createDoc(
        vault,
        { name: 'Cid', city: ['Oslo', 'Rome'], code: 'x7' },
        schema.id,
      )
      const outside = await createDoc(vault, { name: 'Ann', city: 'Oslo', code: 7 })
      expect(await found(vault, schema.id, { name: eq('Ann') })).toEqual([a])
      expectError(
        await searchRes(vault, { schema_id: schema.id, filter: { city: eq('Oslo') } }),
        400,
        /city/,
      )

      // A field added to the schema becomes searchable for documents created before.
      const v2 = [
        { name: 'name', type: 'string', index: true },
        { name: 'city', type: 'string', index: true },
        { name: 'code', type: 'string', index: true },
      ]
      schemaOf(await putSchema(vault, schema.id, { name: 'people', fields: v2 }))
      expect(await found(vault, schema.id, { city: eq('Oslo') })).toEqual([a, c].sort())
      expect(await found(vault, schema.id, { city: eq('Rome') })).toEqual([b, c].sort())
      // As a string, 7 is the text "7" and "007" stays "007".
      expect(await found(vault, schema.id, { code: eq('7') })).toEqual([a])
      expect(await found(vault, schema.id, { code: eq('007') })).toEqual([b])
      expect(await found(vault, schema.id, { code: { type: 'wildcard', value: '*7' } })).toEqual(
        [a, b, c].sort(),
      )
      expect(await found(vault, schema.id, { name: eq('Ann') })).toEqual([a])

      // Re-typed to integer: "007" coerces to 7, "x7" is not indexed; a wildcard is now a 400.
      const v3 = [
        { name: 'name', type: 'string', index: true },
        { name: 'code', type: 'integer', index: true },
        { name: 'born', type: 'date', index: true },
      ]
      schemaOf(await putSchema(vault, schema.id, { name: 'people', fields: v3 }))
      expect(await found(vault, schema.id, { code: eq(7) })).toEqual([a, b].sort())
      expect(await found(vault, schema.id, { code: { type: 'range', value: { gte: 0 } } })).toEqual(
        [a, b].sort(),
      )
      expect(await found(vault, schema.id, { code: { type: 'not', value: 7 } })).toEqual([c])
      expectError(
        await searchRes(vault, {
          schema_id: schema.id,
          filter: { code: { type: 'wildcard', value: '*7' } },
        }),
        400,
        /code/,
      )
      expect(
        await found(vault, schema.id, {
          born: { type: 'range', value: { gte: '1990-01-01', lt: '1990-01-03' } },
        }),
      ).toEqual([a])
      // The removed field is no longer searchable.
      expectError(
        await searchRes(vault, { schema_id: schema.id, filter: { city: eq('Oslo') } }),
        400,
        /city/,
      )

      // index: false keeps the field in the schema but out of the index.
      schemaOf(
        await putSchema(vault, schema.id, {
          name: 'people',
          fields: [
            { name: 'name', type: 'string', index: false },
            { name: 'code', type: 'integer', index: true },
          ],
        }),
      )
      expectError(
        await searchRes(vault, { schema_id: schema.id, filter: { name: eq('Ann') } }),
        400,
        /name/,
      )
      expect(await found(vault, schema.id, { code: eq(7) })).toEqual([a, b].sort())
      // Documents outside the schema never appear.
      expect(await found(vault, schema.id, { code: { type: 'not', value: 12345 } })).not.toContain(
        outside,
      )
    })

    it('documents written while the fields change end up indexed under the new fields', async () => {
      // Regression: on PostgreSQL a create or update racing the schema update kept its index rows
      // under the old fields (the schema was read outside the writing transaction).
      const vault = await newVault()
      const schema = await create(vault, { name: 'race', fields: [{ name: 'a' }] })
      const existing: string[] = []
      for (let i = 0; i < 10; i++) existing.push(await createDoc(vault, { a: 'x' }, schema.id))
      const writes = [
        ...Array.from({ length: 30 }, (_, i) =>
          t.api.post(`/v2/vaults/${vault}/documents`, {
            auth: admin,
            json: { document: { a: 'x', b: 'new', i }, schema_id: schema.id },
          }),
        ),
        ...existing.map((id) =>
          t.api.put(`/v2/vaults/${vault}/documents/${id}`, {
            auth: admin,
            json: { document: { a: 'x', b: 'new' } },
          }),
        ),
      ]
      const change = new Promise((resolve) => setTimeout(resolve, 5)).then(() =>
        putSchema(vault, schema.id, { name: 'race', fields: [{ name: 'a' }, { name: 'b' }] }),
      )
      for (const res of await Promise.all([...writes, change]))
        expect(res.statusCode, res.body).toBe(200)
      const hits = searchData<Hit>(
        await searchRes(vault, { schema_id: schema.id, filter: { b: eq('new') }, per_page: 100 }),
      )
      expect(hits.info.total_result_count).toBe(40)
    })

    it('re-indexes only its own documents: another schema of the vault is untouched', async () => {
      const vault = await newVault()
      const fields = [{ name: 'k', type: 'string', index: true }]
      const s1 = await create(vault, { name: 'one', fields })
      const s2 = await create(vault, { name: 'two', fields })
      const d1 = await createDoc(vault, { k: 'v' }, s1.id)
      const d2 = await createDoc(vault, { k: 'v' }, s2.id)
      schemaOf(
        await putSchema(vault, s1.id, { name: 'one', fields: [{ name: 'k', type: 'integer' }] }),
      )
      expect(await found(vault, s1.id, { k: { type: 'not', value: 1 } })).toEqual([d1])
      expect(await found(vault, s2.id, { k: eq('v') })).toEqual([d2])
    })
  })

  describe('DELETE /v1/vaults/{id}/schemas/{schema_id}', () => {
    it('deletes an unused schema and answers it; then 404, and its name is free again', async () => {
      const vault = await newVault()
      const schema = await create(vault, { name: 'temp', fields: [{ name: 'x' }] })
      const res = await t.api.delete(`/v1/vaults/${vault}/schemas/${schema.id}`, { auth: admin })
      expect(schemaOf(res)).toEqual(schema)
      expectError(await read(vault, schema.id), 404)
      expectError(
        await t.api.delete(`/v1/vaults/${vault}/schemas/${schema.id}`, { auth: admin }),
        404,
      )
      expect(await list(vault)).toEqual([])
      await create(vault, { name: 'TEMP', fields: [] })
    })

    it('refuses a schema documents are tied to (SCHEMA_IN_USE) until they are deleted or detached', async () => {
      const vault = await newVault()
      const schema = await create(vault, { name: 'busy', fields: [{ name: 'foo' }] })
      const kept = await createDoc(vault, { foo: 'a' }, schema.id)
      const removed = await createDoc(vault, { foo: 'b' }, schema.id)
      const del = () => t.api.delete(`/v1/vaults/${vault}/schemas/${schema.id}`, { auth: admin })
      const refused = expectError(await del(), 400, /Documents are tied to this schema/)
      expect(refused.code).toBe('SCHEMA_IN_USE')
      expect(schemaOf(await read(vault, schema.id))).toEqual(schema)
      expect(await found(vault, schema.id, { foo: { type: 'in', value: ['a', 'b'] } })).toEqual(
        [kept, removed].sort(),
      )
      expect(
        (await t.api.delete(`/v1/vaults/${vault}/documents/${removed}`, { auth: admin }))
          .statusCode,
      ).toBe(200)
      expect(errorOf(await del()).code).toBe('SCHEMA_IN_USE')
      // Detaching the last one (the document itself stays).
      const detach = await t.api.put(`/v2/vaults/${vault}/documents/${kept}`, {
        auth: admin,
        json: { document: { foo: 'a' }, schema_id: null },
      })
      expect(detach.statusCode, detach.body).toBe(200)
      expect(detach.json().document.schema_id).toBeNull()
      expect(schemaOf(await del())).toEqual(schema)
      expectError(await read(vault, schema.id), 404)
      const doc = await t.api.get(`/v2/vaults/${vault}/documents/${kept}`, { auth: admin })
      expect(doc.json().documents[0].document).toEqual({ foo: 'a' })
      // A vault that held schemas can be deleted once they are gone (and its documents).
      expect(
        (await t.api.delete(`/v1/vaults/${vault}/documents/${kept}`, { auth: admin })).statusCode,
      ).toBe(200)
      expect((await t.api.delete(`/v1/vaults/${vault}`, { auth: admin })).statusCode).toBe(200)
    })
  })

  describe('permissions on Vault::V::Schema::…', () => {
    it('C creates, R reads, U updates, D deletes: each only its own activity', async () => {
      const vault = await newVault()
      const target = await create(vault, { name: 'target', fields: [] })
      const on = (id: string, activities: string) =>
        userWith([{ Resources: [`Vault::${vault}::Schema::${id}`], Activities: activities }])
      const creator = await on('', 'C')
      const reader = await on(target.id, 'R')
      const updater = await on(target.id, 'U')
      const deleter = await on(target.id, 'D')

      const made = await create(vault, { name: 'by-creator', fields: [] }, creator.apiKey)
      expect(made.vault_id).toBe(vault)
      // C on the collection is not R on what was made.
      expectError(await read(vault, made.id, creator.apiKey), 401)
      for (const u of [reader, updater, deleter])
        expectError(await postSchema(vault, { name: uniqueName(), fields: [] }, u.apiKey), 401)

      expect(schemaOf(await read(vault, target.id, reader.apiKey))).toEqual(target)
      for (const u of [creator, updater, deleter])
        expectError(await read(vault, target.id, u.apiKey), 401)

      const def = { name: 'renamed', fields: [{ name: 'f' }] }
      for (const u of [creator, reader, deleter])
        expectError(await putSchema(vault, target.id, def, u.apiKey), 401)
      expect(schemaOf(await putSchema(vault, target.id, def, updater.apiKey)).name).toBe('renamed')
      // U on one schema is not U on another.
      expectError(await putSchema(vault, made.id, def, updater.apiKey), 401)

      const del = (auth: string) =>
        t.api.delete(`/v1/vaults/${vault}/schemas/${target.id}`, { auth })
      for (const u of [creator, reader, updater]) expectError(await del(u.apiKey), 401)
      expect(schemaOf(await del(deleter.apiKey)).id).toBe(target.id)

      // Denials are the same whether or not the schema exists (no existence oracle).
      expectError(await read(vault, MISSING, creator.apiKey), 401)
      // A caller with the right grant learns that a missing one is missing.
      const wide = await userWith([
        { Resources: [`Vault::${vault}::Schema::.*`], Activities: 'CRUD' },
      ])
      expectError(await read(vault, MISSING, wide.apiKey), 404)
      // Grants in another vault do not carry over.
      const other = await newVault()
      expectError(await postSchema(other, { name: 'x', fields: [] }, wide.apiKey), 401)
    })
  })

  describe('index maintenance through documents', () => {
    let vault: string
    let schema: SchemaBody
    beforeAll(async () => {
      vault = await newVault()
      schema = await create(vault, {
        name: 'idx',
        fields: [
          { name: 'foo', type: 'string', index: true },
          { name: 'n', type: 'integer', index: true },
        ],
      })
    })

    it('a v2 and a v1 create with schema_id are searchable at once', async () => {
      const v2 = await createDoc(vault, { foo: 'created', n: 1 }, schema.id)
      const v1 = await t.api.post(`/v1/vaults/${vault}/documents`, {
        auth: admin,
        form: { document: b64({ foo: 'created', n: 2 }), schema_id: schema.id },
      })
      expect(v1.statusCode, v1.body).toBe(200)
      const v1id = v1.json().document_id as string
      const multi = await t.api.post(`/v1/vaults/${vault}/documents`, {
        auth: admin,
        multipart: { document: b64({ foo: 'created', n: 3 }), schema_id: schema.id },
      })
      expect(multi.statusCode, multi.body).toBe(200)
      const hits = searchData<Hit>(
        await searchRes(vault, {
          schema_id: schema.id,
          filter: { foo: eq('created') },
          sort: [{ n: 'asc' }],
          full_document: true,
        }),
      ).documents
      expect(hits.map((h) => h.document_id)).toEqual([v2, v1id, multi.json().document_id])
      expect(hits.map((h) => unb64(h.document as string))).toEqual([
        { foo: 'created', n: 1 },
        { foo: 'created', n: 2 },
        { foo: 'created', n: 3 },
      ])
      // Without schema_id, a document is in no index.
      await createDoc(vault, { foo: 'created', n: 4 })
      expect(await found(vault, schema.id, { n: eq(4) })).toEqual([])
    })

    it('updates change what matches (v2 and v1), and attaching by update indexes the content', async () => {
      const d = await createDoc(vault, { foo: 'old' }, schema.id)
      expect(await found(vault, schema.id, { foo: eq('old') })).toEqual([d])
      const v2 = await t.api.put(`/v2/vaults/${vault}/documents/${d}`, {
        auth: admin,
        json: { document: { foo: 'new' } },
      })
      expect(v2.statusCode, v2.body).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('old') })).toEqual([])
      expect(await found(vault, schema.id, { foo: eq('new') })).toEqual([d])
      const v1 = await t.api.put(`/v1/vaults/${vault}/documents/${d}`, {
        auth: admin,
        form: { document: b64({ foo: 'newer', n: 77 }) },
      })
      expect(v1.statusCode, v1.body).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('new') })).toEqual([])
      expect(await found(vault, schema.id, { n: eq(77) })).toEqual([d])

      // A document made without a schema joins it by update (v2 and v1 forms).
      const loose = await createDoc(vault, { foo: 'loose' })
      expect(await found(vault, schema.id, { foo: eq('loose') })).toEqual([])
      const attach = await t.api.put(`/v2/vaults/${vault}/documents/${loose}`, {
        auth: admin,
        json: { document: { foo: 'loose' }, schema_id: schema.id },
      })
      expect(attach.statusCode, attach.body).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('loose') })).toEqual([loose])
      const loose1 = await createDoc(vault, { foo: 'loose1' })
      const attach1 = await t.api.put(`/v1/vaults/${vault}/documents/${loose1}`, {
        auth: admin,
        form: { document: b64({ foo: 'loose1' }), schema_id: schema.id },
      })
      expect(attach1.statusCode, attach1.body).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('loose1') })).toEqual([loose1])
      // An owner change touches neither content nor index.
      const owner = await createUser(t)
      const own = await t.api.put(`/v1/vaults/${vault}/documents/${loose1}/owner`, {
        auth: admin,
        form: { owner_id: owner.id },
      })
      expect(own.statusCode, own.body).toBe(200)
      const hit = searchData<Hit>(
        await searchRes(vault, { schema_id: schema.id, filter: { foo: eq('loose1') } }),
      ).documents
      expect(hit).toEqual([{ document_id: loose1, owner_id: owner.id }])
    })

    it('moving a document to another schema moves it between result sets', async () => {
      const other = await create(vault, { name: uniqueName(), fields: [{ name: 'foo' }] })
      const d = await createDoc(vault, { foo: 'mover' }, schema.id)
      const res = await t.api.put(`/v2/vaults/${vault}/documents/${d}`, {
        auth: admin,
        json: { document: { foo: 'mover' }, schema_id: other.id },
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('mover') })).toEqual([])
      expect(await found(vault, other.id, { foo: eq('mover') })).toEqual([d])
      // A schema of another vault is refused and changes nothing.
      const elsewhere = await create(await newVault(), { name: 'x', fields: [{ name: 'foo' }] })
      const bad = await t.api.put(`/v2/vaults/${vault}/documents/${d}`, {
        auth: admin,
        json: { document: { foo: 'mover' }, schema_id: elsewhere.id },
      })
      expectError(bad, 400, /schema_id/)
      expect(await found(vault, other.id, { foo: eq('mover') })).toEqual([d])
    })

    it('detaching (schema_id: null) and deleting remove a document from the results', async () => {
      const detached = await createDoc(vault, { foo: 'gone' }, schema.id)
      const deleted = await createDoc(vault, { foo: 'gone' }, schema.id)
      expect(await found(vault, schema.id, { foo: eq('gone') })).toEqual([detached, deleted].sort())
      const res = await t.api.put(`/v2/vaults/${vault}/documents/${detached}`, {
        auth: admin,
        json: { document: { foo: 'gone' }, schema_id: null },
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('gone') })).toEqual([deleted])
      // Even `not` (which matches documents lacking the field) does not reach a detached document.
      expect(await found(vault, schema.id, { foo: { type: 'not', value: 'zzz' } })).not.toContain(
        detached,
      )
      expect(
        (await t.api.delete(`/v1/vaults/${vault}/documents/${deleted}`, { auth: admin }))
          .statusCode,
      ).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('gone') })).toEqual([])
      const rows = await t.deps.store.db
        .selectFrom('search_index')
        .select('doc_id')
        .where('doc_id', 'in', [detached, deleted])
        .execute()
      expect(rows).toEqual([])
    })

    it('POST …/reindex rebuilds a document’s entries: API key only, U on the document', async () => {
      const d = await createDoc(vault, { foo: 'stale' }, schema.id)
      // Lose the index rows behind the service's back.
      await t.deps.store.db.deleteFrom('search_index').where('doc_id', '=', d).execute()
      expect(await found(vault, schema.id, { foo: eq('stale') })).toEqual([])
      const url = `/v1/vaults/${vault}/documents/${d}/reindex`
      const res = await t.api.post(url, { auth: admin })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json()).toMatchObject({ result: 'success', document_id: d })
      expect(await found(vault, schema.id, { foo: eq('stale') })).toEqual([d])
      // Reindexing twice changes nothing.
      expect((await t.api.post(url, { auth: admin })).statusCode).toBe(200)
      expect(await found(vault, schema.id, { foo: eq('stale') })).toEqual([d])

      // An access token is refused, even the admin's.
      const login = await t.api.post('/v1/auth/login', {
        form: {
          account_id: t.admin.account_id,
          username: t.admin.username,
          password: t.admin.password,
        },
      })
      expect(login.statusCode, login.body).toBe(200)
      const adminToken = login.json().user.access_token as string
      expect(
        (await t.api.get(`/v1/vaults/${vault}/schemas/${schema.id}`, { auth: adminToken }))
          .statusCode,
      ).toBe(200)
      const refused = expectError(await t.api.post(url, { auth: adminToken }), 401)
      expect(refused.code).toBe('CREDENTIAL_NOT_ALLOWED')
      expectError(await t.api.post(url), 401)
      const reader = await userWith([
        { Resources: [`Vault::${vault}::Document::${d}`], Activities: 'R' },
      ])
      expectError(await t.api.post(url, { auth: reader.apiKey }), 401)
      const other = await createDoc(vault, { foo: 'other' }, schema.id)
      const updaterOfOther = await userWith([
        { Resources: [`Vault::${vault}::Document::${other}`], Activities: 'U' },
      ])
      expectError(await t.api.post(url, { auth: updaterOfOther.apiKey }), 404)
      const updater = await userWith([
        { Resources: [`Vault::${vault}::Document::${d}`], Activities: 'U' },
      ])
      const ok = await t.api.post(url, { auth: updater.apiKey })
      expect(ok.statusCode, ok.body).toBe(200)
      expect(ok.json().document_id).toBe(d)
      expect(errorOf(await t.api.post(url, { auth: updater.accessToken })).code).toBe(
        'CREDENTIAL_NOT_ALLOWED',
      )

      expectError(
        await t.api.post(`/v1/vaults/${vault}/documents/${MISSING}/reindex`, { auth: admin }),
        404,
      )
      // A document without a schema has no entries: reindexing it drops any stray rows.
      const loose = await createDoc(vault, { foo: 'stray' })
      await t.deps.store.db
        .insertInto('search_index')
        .values({
          account_id: t.admin.account_id,
          schema_id: schema.id,
          doc_id: loose,
          field: 'foo',
          ord: 0,
          value_text: 'stray',
          value_lower: 'stray',
          value_num: null,
          geo_lat: null,
          geo_long: null,
        })
        .execute()
      const looseRes = await t.api.post(`/v1/vaults/${vault}/documents/${loose}/reindex`, {
        auth: admin,
      })
      expect(looseRes.statusCode, looseRes.body).toBe(200)
      expect(looseRes.json().document_id).toBe(loose)
      const rows = await t.deps.store.db
        .selectFrom('search_index')
        .select('doc_id')
        .where('doc_id', '=', loose)
        .execute()
      expect(rows).toEqual([])
    })

    it('reindexes racing updates of the same document all succeed and leave its latest content', async () => {
      // Regression: on PostgreSQL a reindex read the content before its transaction and raced
      // other writers of the document's index rows (stale entries, or a 500 on a duplicate row).
      const d = await createDoc(vault, { foo: 'r0' }, schema.id)
      const url = `/v1/vaults/${vault}/documents/${d}/reindex`
      for (let i = 1; i <= 10; i++) {
        const results = await Promise.all([
          t.api.post(url, { auth: admin }),
          t.api.put(`/v2/vaults/${vault}/documents/${d}`, {
            auth: admin,
            json: { document: { foo: `r${i}` } },
          }),
          t.api.post(url, { auth: admin }),
        ])
        for (const res of results) expect(res.statusCode, res.body).toBe(200)
        expect(await found(vault, schema.id, { foo: eq(`r${i}`) })).toEqual([d])
        expect(await found(vault, schema.id, { foo: eq(`r${i - 1}`) })).toEqual([])
      }
    })
  })
})
