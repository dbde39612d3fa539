import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { newId } from '../../src/lib/ids.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { buildTestApp, createUser, errorOf, type TestApp, unb64 } from '../helpers/app.js'

interface ListItem {
  id: string
  vault_id: string
  owner_id: string | null
  schema_id: string | null
  document?: string
}
interface ListData {
  items: ListItem[]
  page: number
  per_page: number
  total: number
  full_document: boolean
}

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp) {
  expect(res.statusCode, res.body).toBe(status)
  const error = errorOf(res)
  if (message) expect(error.message).toMatch(message)
  return error
}

function dataOf(res: LightMyRequestResponse): ListData {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  expect(typeof body.transaction_id).toBe('string')
  return body.data as ListData
}

describe('document lists', () => {
  let t: TestApp
  let admin: string

  const newVault = async () => {
    const res = await t.api.post('/v1/vaults', { auth: admin, form: { name: `v-${randomUUID()}` } })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().vault.id as string
  }

  async function createDoc(
    vault: string,
    document: unknown,
    extra: { owner_id?: string | null; schema_id?: string } = {},
  ) {
    const res = await t.api.post(`/v2/vaults/${vault}/documents`, {
      auth: admin,
      json: { document, ...extra },
    })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().document as ListItem
  }

  async function insertSchema(vaultId: string) {
    const id = newId()
    const now = new Date().toISOString()
    await t.deps.store.db
      .insertInto('schemas')
      .values({
        account_id: t.admin.account_id,
        vault_id: vaultId,
        id,
        name: `schema-${id}`,
        fields: '[]',
        created_at: now,
        updated_at: now,
      })
      .execute()
    return id
  }

  const list = (vault: string, query = '', auth = admin) =>
    t.api.get(`/v1/vaults/${vault}/documents${query}`, { auth })

  const policyUser = (policy: PolicyStatement[]) => createUser(t, { policy })

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
  })
  afterAll(() => t.close())

  describe('GET /v1/vaults/{v}/documents', () => {
    let vault: string
    const contents = [{ n: 0 }, [1], 'two', 3, { n: 4, deep: { x: [true] } }]
    let made: ListItem[]

    beforeAll(async () => {
      vault = await newVault()
      made = []
      for (const c of contents) made.push(await createDoc(vault, c))
    })

    it('lists with defaults page 1, per_page 100, full false, in creation order', async () => {
      const data = dataOf(await list(vault))
      expect(data).toEqual({ items: made, page: 1, per_page: 100, total: 5, full_document: false })
      for (const item of data.items) {
        expect(Object.keys(item).sort()).toEqual(['id', 'owner_id', 'schema_id', 'vault_id'])
      }
    })

    it.each(['true', '1', '01', 'TRUE'])('full=%s adds the base64 content', async (full) => {
      const data = dataOf(await list(vault, `?full=${full}`))
      expect(data.full_document).toBe(true)
      expect(data.items.map(({ document, ...meta }) => meta)).toEqual(made)
      expect(data.items.map((i) => unb64(i.document as string))).toEqual(contents)
    })

    it.each(['false', '0', '', 'no'])('full=%s leaves the content out', async (full) => {
      const data = dataOf(await list(vault, `?full=${full}`))
      expect(data.full_document).toBe(false)
      expect(data.items).toEqual(made)
    })

    it('tolerates the SDK’s empty query segment and unknown parameters', async () => {
      const data = dataOf(await list(vault, '?&full=true&_tv_sdk=1.3.1'))
      expect(data.full_document).toBe(true)
      expect(data.items).toHaveLength(5)
    })

    it('pages with page and per_page; total stays the whole count', async () => {
      const p1 = dataOf(await list(vault, '?per_page=2'))
      expect(p1).toMatchObject({ page: 1, per_page: 2, total: 5 })
      expect(p1.items).toEqual(made.slice(0, 2))
      const p2 = dataOf(await list(vault, '?page=2&per_page=2&full=true'))
      expect(p2).toMatchObject({ page: 2, per_page: 2, total: 5, full_document: true })
      expect(p2.items.map((i) => i.id)).toEqual(made.slice(2, 4).map((i) => i.id))
      expect(p2.items.map((i) => unb64(i.document as string))).toEqual(contents.slice(2, 4))
      const p3 = dataOf(await list(vault, '?page=3&per_page=2'))
      expect(p3.items).toEqual(made.slice(4))
      const past = dataOf(await list(vault, '?page=9&per_page=2'))
      expect(past).toMatchObject({ items: [], page: 9, total: 5 })
      expect(dataOf(await list(vault, '?per_page=500')).items).toEqual(made)
    })

    it('refuses per_page 0 or 501 and page 0 with 400', async () => {
      for (const q of ['per_page=501', 'per_page=0', 'page=0', 'page=-1', 'per_page=ten']) {
        const error = expectError(await list(vault, `?${q}`), 400)
        expect(error.type).toBe('invalid_request_error')
      }
    })

    it('shows owners and is empty for an empty vault', async () => {
      const v = await newVault()
      expect(dataOf(await list(v))).toEqual({
        items: [],
        page: 1,
        per_page: 100,
        total: 0,
        full_document: false,
      })
      const u = await createUser(t)
      const owned = await createDoc(v, {}, { owner_id: u.id })
      expect(dataOf(await list(v)).items).toEqual([{ ...owned, owner_id: u.id }])
    })

    it('no longer lists a deleted document', async () => {
      const v = await newVault()
      const a = await createDoc(v, 1)
      const b = await createDoc(v, 2)
      const del = await t.api.delete(`/v1/vaults/${v}/documents/${a.id}`, { auth: admin })
      expect(del.statusCode, del.body).toBe(200)
      expect(dataOf(await list(v))).toMatchObject({ items: [b], total: 1 })
    })

    it('answers 404 for an unknown vault, 400 for a malformed one, 401 without credentials', async () => {
      expect(expectError(await list(randomUUID()), 404).type).toBe('not_found_error')
      expectError(await list('vault-1'), 400, /vault_id/)
      expectError(await t.api.get(`/v1/vaults/${vault}/documents`), 401)
    })
  })

  describe('only readable documents', () => {
    let vault: string
    let alice: Awaited<ReturnType<typeof createUser>>
    let bob: Awaited<ReturnType<typeof createUser>>
    let aliceDocs: ListItem[]
    let bobDocs: ListItem[]
    let unowned: ListItem[]

    beforeAll(async () => {
      vault = await newVault()
      const self: PolicyStatement[] = [
        { Resources: [`Vault::${vault}::Document::$[Owner=self]`], Activities: 'R' },
      ]
      alice = await policyUser(self)
      bob = await policyUser(self)
      aliceDocs = []
      bobDocs = []
      unowned = []
      // Interleaved, so paging must skip others' documents.
      for (let i = 0; i < 3; i++) {
        aliceDocs.push(await createDoc(vault, { a: i }, { owner_id: alice.id }))
        unowned.push(await createDoc(vault, { u: i }))
        bobDocs.push(await createDoc(vault, { b: i }, { owner_id: bob.id }))
      }
    })

    it('a caller with R on $[Owner=self] lists exactly their own; total is their count', async () => {
      const a = dataOf(await list(vault, '?full=true', alice.apiKey))
      expect(a.total).toBe(3)
      expect(a.items.map(({ document, ...m }) => m)).toEqual(aliceDocs)
      expect(a.items.map((i) => unb64(i.document as string))).toEqual([
        { a: 0 },
        { a: 1 },
        { a: 2 },
      ])
      const b = dataOf(await list(vault, '', bob.apiKey))
      expect(b).toMatchObject({ items: bobDocs, total: 3 })
      // The admin sees all nine.
      expect(dataOf(await list(vault)).total).toBe(9)
    })

    it('pages within the readable documents', async () => {
      const p1 = dataOf(await list(vault, '?per_page=2', alice.apiKey))
      expect(p1).toMatchObject({ items: aliceDocs.slice(0, 2), total: 3 })
      const p2 = dataOf(await list(vault, '?per_page=2&page=2', alice.apiKey))
      expect(p2).toMatchObject({ items: aliceDocs.slice(2), total: 3 })
    })

    it('R on $[Owner=.*] lists every owned document, never unowned ones', async () => {
      const anyOwner = await policyUser([
        { Resources: [`Vault::${vault}::Document::$[Owner=.*]`], Activities: 'R' },
      ])
      const data = dataOf(await list(vault, '', anyOwner.apiKey))
      expect(data.total).toBe(6)
      expect(data.items.map((i) => i.id).sort()).toEqual(
        [...aliceDocs, ...bobDocs].map((d) => d.id).sort(),
      )
    })

    it('R on $[Owner=<id>] and on single documents lists just those', async () => {
      const picked = unowned[1] as ListItem
      const user = await policyUser([
        {
          Resources: [
            `Vault::${vault}::Document::$[Owner=${bob.id}]`,
            `Vault::${vault}::Document::${picked.id}`,
          ],
          Activities: 'R',
        },
      ])
      const data = dataOf(await list(vault, '', user.apiKey))
      expect(data.total).toBe(4)
      expect(data.items.map((i) => i.id).sort()).toEqual(
        [...bobDocs, picked].map((d) => d.id).sort(),
      )
    })

    it('a caller with no R on the collection gets 401', async () => {
      const cases: PolicyStatement[][] = [
        [{ Resources: [`Vault::${vault}::Document::`], Activities: 'C' }],
        [{ Resources: [`Vault::${vault}`], Activities: 'CRUD' }],
        [{ Resources: [`Vault::${randomUUID()}::Document::.*`], Activities: 'R' }],
        [{ Resources: [`Vault::${vault}::Document::.*`], Activities: 'CUD' }],
      ]
      for (const policy of cases) {
        const user = await policyUser(policy)
        const error = expectError(await list(vault, '', user.apiKey), 401)
        expect(error.code).toBe('PERMISSION_DENIED')
      }
      const nobody = await createUser(t)
      expectError(await list(vault, '', nobody.apiKey), 401)
    })

    it('a vault-wide R on documents lists them all', async () => {
      const user = await policyUser([{ Resources: ['Vault::.*::Document::.*'], Activities: 'R' }])
      expect(dataOf(await list(vault, '', user.apiKey)).total).toBe(9)
    })
  })

  describe('GET /v1/vaults/{v}/schemas/{s}/documents', () => {
    let vault: string
    let schema: string
    let other: string
    let inSchema: ListItem[]
    let owner: Awaited<ReturnType<typeof createUser>>

    beforeAll(async () => {
      vault = await newVault()
      schema = await insertSchema(vault)
      other = await insertSchema(vault)
      owner = await policyUser([
        { Resources: [`Vault::${vault}::Document::$[Owner=self]`], Activities: 'R' },
      ])
      inSchema = []
      inSchema.push(await createDoc(vault, { s: 0 }, { schema_id: schema }))
      await createDoc(vault, { free: true })
      await createDoc(vault, { o: 1 }, { schema_id: other })
      inSchema.push(await createDoc(vault, { s: 1 }, { schema_id: schema, owner_id: owner.id }))
      await createDoc(vault, ['free'], { owner_id: owner.id })
    })

    const schemaList = (s: string, query = '', auth = admin, v = vault) =>
      t.api.get(`/v1/vaults/${v}/schemas/${s}/documents${query}`, { auth })

    it('lists only the schema’s documents, with full and paging', async () => {
      const data = dataOf(await schemaList(schema))
      expect(data).toEqual({
        items: inSchema,
        page: 1,
        per_page: 100,
        total: 2,
        full_document: false,
      })
      expect(data.items.every((i) => i.schema_id === schema)).toBe(true)
      const full = dataOf(await schemaList(schema, '?full=true&per_page=1&page=2'))
      expect(full).toMatchObject({ page: 2, per_page: 1, total: 2, full_document: true })
      expect(full.items.map((i) => unb64(i.document as string))).toEqual([{ s: 1 }])
      expect(dataOf(await schemaList(other)).total).toBe(1)
      expectError(await schemaList(schema, '?per_page=501'), 400)
    })

    it('a schema without documents lists nothing', async () => {
      const empty = await insertSchema(vault)
      expect(dataOf(await schemaList(empty))).toMatchObject({ items: [], total: 0 })
    })

    it('applies the caller’s read scope', async () => {
      expect(dataOf(await schemaList(schema, '', owner.apiKey))).toMatchObject({
        items: [inSchema[1]],
        total: 1,
      })
    })

    it('forgets a document detached from the schema', async () => {
      const d = await createDoc(vault, { d: 1 }, { schema_id: schema })
      expect(dataOf(await schemaList(schema)).total).toBe(3)
      const res = await t.api.put(`/v2/vaults/${vault}/documents/${d.id}`, {
        auth: admin,
        json: { document: { d: 2 }, schema_id: null },
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(dataOf(await schemaList(schema)).items).toEqual(inSchema)
    })

    it('answers 404 for an unknown schema or one of another vault, 400 when malformed', async () => {
      expect(expectError(await schemaList(randomUUID()), 404).type).toBe('not_found_error')
      const v2 = await newVault()
      const foreign = await insertSchema(v2)
      expectError(await schemaList(foreign), 404)
      expectError(await schemaList(schema, '', admin, v2), 404)
      expectError(await schemaList(schema, '', admin, randomUUID()), 404)
      expectError(await schemaList('schema-1'), 400, /schema_id/)
    })

    it('answers 401 to a caller with no R on the documents', async () => {
      const user = await policyUser([{ Resources: [`Vault::${vault}`], Activities: 'R' }])
      expectError(await schemaList(schema, '', user.apiKey), 401)
    })
  })

  describe('cross-account', () => {
    it('another account’s admin gets 404 for the vault’s lists', async () => {
      const vault = await newVault()
      const schema = await insertSchema(vault)
      await createDoc(vault, { secret: true }, { schema_id: schema })
      const b = await t.newAccount()
      expectError(await list(vault, '?full=true', b.api_key), 404)
      expectError(
        await t.api.get(`/v1/vaults/${vault}/schemas/${schema}/documents`, { auth: b.api_key }),
        404,
      )
    })
  })
})
