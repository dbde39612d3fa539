import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { newId } from '../../src/lib/ids.js'
import { type Admin, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

interface DocMeta {
  id: string
  vault_id: string
  owner_id: string | null
  schema_id: string | null
}
interface DocRead extends DocMeta {
  document: unknown
}

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp) {
  expect(res.statusCode, res.body).toBe(status)
  const error = errorOf(res)
  if (message) expect(error.message).toMatch(message)
  return error
}

/** A create or update answer: `{document: {id, vault_id, owner_id, schema_id}, document_id}`. */
function metaOf(res: LightMyRequestResponse): DocMeta {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  expect(typeof body.transaction_id).toBe('string')
  expect(Object.keys(body.document).sort()).toEqual(['id', 'owner_id', 'schema_id', 'vault_id'])
  expect(body.document_id).toBe(body.document.id)
  return body.document as DocMeta
}

function docsOf(res: LightMyRequestResponse): DocRead[] {
  expect(res.statusCode, res.body).toBe(200)
  expect(res.json().result).toBe('success')
  return res.json().documents as DocRead[]
}

describe('documents v2', () => {
  let t: TestApp
  let admin: string
  let vault: string

  const newVault = async (auth = admin) => {
    const res = await t.api.post('/v1/vaults', { auth, form: { name: `v-${randomUUID()}` } })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().vault.id as string
  }

  const create = (json: unknown, o: { auth?: string; vault?: string } = {}) =>
    t.api.post(`/v2/vaults/${o.vault ?? vault}/documents`, { auth: o.auth ?? admin, json })

  const createOk = async (json: unknown, o: { auth?: string; vault?: string } = {}) =>
    metaOf(await create(json, o))

  const read = (ids: string | string[], o: { auth?: string; vault?: string } = {}) =>
    t.api.get(
      `/v2/vaults/${o.vault ?? vault}/documents/${Array.isArray(ids) ? ids.join(',') : ids}`,
      { auth: o.auth ?? admin },
    )

  const readOne = async (id: string, o: { auth?: string; vault?: string } = {}) => {
    const docs = docsOf(await read(id, o))
    expect(docs).toHaveLength(1)
    return docs[0] as DocRead
  }

  const update = (id: string, json: unknown, o: { auth?: string; vault?: string } = {}) =>
    t.api.put(`/v2/vaults/${o.vault ?? vault}/documents/${id}`, { auth: o.auth ?? admin, json })

  /** Schemas have no endpoints yet: a row straight into the table. */
  async function insertSchema(vaultId: string, accountId = t.admin.account_id) {
    const id = newId()
    const now = new Date().toISOString()
    await t.deps.store.db
      .insertInto('schemas')
      .values({
        account_id: accountId,
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

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
    vault = await newVault()
  })
  afterAll(() => t.close())

  describe('POST /v2/vaults/{v}/documents', () => {
    it.each([
      ['an object', { name: 'Ada', tags: ['a', 'b'], nested: { n: 1, ok: true, none: null } }],
      ['an array', [1, 'two', { three: 3 }]],
      ['a string', 'just text ✓'],
      ['a number', 42.5],
      ['zero', 0],
      ['a boolean', false],
      ['an empty object', {}],
    ])('stores %s as is when no schema is given', async (_, content) => {
      const meta = await createOk({ document: content })
      expect(meta).toEqual({ id: meta.id, vault_id: vault, owner_id: null, schema_id: null })
      expect(await readOne(meta.id)).toEqual({ ...meta, document: content })
    })

    it('is ownerless with owner_id null or omitted', async () => {
      expect((await createOk({ document: { a: 1 }, owner_id: null })).owner_id).toBeNull()
      expect((await createOk({ document: { a: 1 } })).owner_id).toBeNull()
    })

    it('is owned by a user of the account', async () => {
      const user = await createUser(t)
      const meta = await createOk({ document: { a: 1 }, owner_id: user.id })
      expect(meta.owner_id).toBe(user.id)
      expect((await readOne(meta.id)).owner_id).toBe(user.id)
      // An upper-case id names the same user.
      const upper = await createOk({ document: { a: 2 }, owner_id: user.id.toUpperCase() })
      expect(upper.owner_id).toBe(user.id)
    })

    it('refuses an owner who is not a user of the account with 400', async () => {
      const other = await t.newAccount()
      expectError(await create({ document: {}, owner_id: randomUUID() }), 400, /owner_id/)
      expectError(await create({ document: {}, owner_id: other.userId }), 400, /owner_id/)
    })

    it('refuses a malformed owner_id with 400', async () => {
      for (const owner_id of ['nope', '123', 7, { id: 'x' }, true]) {
        expectError(await create({ document: {}, owner_id }), 400, /owner_id/)
      }
    })

    it('refuses a missing document, a non-object body and bad JSON with 400', async () => {
      expectError(await create({}), 400, /document/)
      expectError(await create({ owner_id: null }), 400, /document/)
      expectError(await t.api.post(`/v2/vaults/${vault}/documents`, { auth: admin }), 400)
      expectError(await create([{ document: {} }]), 400)
      // An empty body with a JSON content type is no body at all.
      const empty = await t.api.post(`/v2/vaults/${vault}/documents`, {
        auth: admin,
        headers: { 'content-type': 'application/json' },
      })
      expectError(empty, 400)
      const malformed = await t.app.inject({
        method: 'POST',
        url: `/v2/vaults/${vault}/documents`,
        headers: {
          authorization: `Basic ${Buffer.from(`${admin}:`).toString('base64')}`,
          'content-type': 'application/json',
        },
        payload: '{"document": {',
      })
      expect(expectError(malformed, 400).code).toBe('INVALID_JSON')
    })

    it('answers 404 for an unknown vault and 400 for a malformed vault id', async () => {
      expect(expectError(await create({ document: {} }, { vault: randomUUID() }), 404).type).toBe(
        'not_found_error',
      )
      expectError(await create({ document: {} }, { vault: 'vault' }), 400, /vault_id/)
    })

    it('answers 401 without a credential', async () => {
      const res = await t.api.post(`/v2/vaults/${vault}/documents`, { json: { document: {} } })
      expect(expectError(res, 401).type).toBe('authentication_error')
    })
  })

  describe('GET /v2/vaults/{v}/documents/{ids}', () => {
    let a: DocMeta
    let b: DocMeta
    let c: DocMeta

    beforeAll(async () => {
      a = await createOk({ document: { n: 'a' } })
      b = await createOk({ document: ['b'] })
      c = await createOk({ document: 'c' })
    })

    it('answers an array even for one id', async () => {
      expect(docsOf(await read(a.id))).toEqual([{ ...a, document: { n: 'a' } }])
    })

    it('answers several ids in the order requested', async () => {
      const docs = docsOf(await read([c.id, a.id, b.id]))
      expect(docs.map((d) => d.id)).toEqual([c.id, a.id, b.id])
      expect(docs.map((d) => d.document)).toEqual(['c', { n: 'a' }, ['b']])
      for (const d of docs)
        expect(Object.keys(d).sort()).toEqual([
          'document',
          'id',
          'owner_id',
          'schema_id',
          'vault_id',
        ])
      expect(docsOf(await read([b.id, c.id])).map((d) => d.id)).toEqual([b.id, c.id])
    })

    it('accepts upper-case ids and blanks around commas', async () => {
      const docs = docsOf(await read(`${a.id.toUpperCase()}, ${b.id}`))
      expect(docs.map((d) => d.id)).toEqual([a.id, b.id])
    })

    it('answers 404 when any id is missing', async () => {
      expectError(await read(randomUUID()), 404)
      expect(expectError(await read([a.id, randomUUID(), b.id]), 404).type).toBe('not_found_error')
    })

    it('answers 404 for a document of another vault', async () => {
      const elsewhere = await newVault()
      const d = await createOk({ document: 1 }, { vault: elsewhere })
      expectError(await read(d.id), 404)
      expectError(await read([a.id, d.id]), 404)
      expect((await readOne(d.id, { vault: elsewhere })).document).toBe(1)
    })

    it('takes at most 100 ids (100 is checked, 101 is a 400)', async () => {
      const hundred = Array.from({ length: 100 }, () => randomUUID())
      expectError(await read(hundred), 404)
      const error = expectError(await read([...hundred, randomUUID()]), 400, /document_ids/)
      expect(error.type).toBe('invalid_request_error')
    })

    it('answers 400 for a malformed id, even among good ones', async () => {
      expectError(await read('not-a-uuid'), 400, /document_ids/)
      expectError(await read([a.id, 'xyz']), 400, /document_ids/)
      expectError(await read(','), 400, /document_ids/)
    })

    it('answers 404 for an unknown vault', async () => {
      expectError(await read(a.id, { vault: randomUUID() }), 404)
    })
  })

  describe('PUT /v2/vaults/{v}/documents/{id}', () => {
    it('replaces the content, keeping an omitted owner', async () => {
      const user = await createUser(t)
      const meta = await createOk({ document: { v: 1, gone: true }, owner_id: user.id })
      const after = metaOf(await update(meta.id, { document: { v: 2 } }))
      expect(after).toEqual(meta)
      expect(await readOne(meta.id)).toEqual({ ...meta, document: { v: 2 } })
      // Any JSON without a schema, here a string then an array.
      metaOf(await update(meta.id, { document: 'now text' }))
      expect((await readOne(meta.id)).document).toBe('now text')
      metaOf(await update(meta.id, { document: [1, 2] }))
      expect(await readOne(meta.id)).toEqual({ ...meta, document: [1, 2] })
    })

    it('owner_id null makes the document ownerless; a user id sets it', async () => {
      const user = await createUser(t)
      const meta = await createOk({ document: {}, owner_id: user.id })
      expect(metaOf(await update(meta.id, { document: { x: 1 }, owner_id: null })).owner_id).toBe(
        null,
      )
      expect((await readOne(meta.id)).owner_id).toBeNull()
      const other = await createUser(t)
      expect(
        metaOf(await update(meta.id, { document: { x: 2 }, owner_id: other.id })).owner_id,
      ).toBe(other.id)
      expect(await readOne(meta.id)).toMatchObject({ owner_id: other.id, document: { x: 2 } })
    })

    it('refuses an owner who is not a user of the account, or malformed, with 400', async () => {
      const meta = await createOk({ document: { keep: true } })
      expectError(await update(meta.id, { document: {}, owner_id: randomUUID() }), 400, /owner_id/)
      expectError(await update(meta.id, { document: {}, owner_id: 'bad' }), 400, /owner_id/)
      expect(await readOne(meta.id)).toMatchObject({ owner_id: null, document: { keep: true } })
    })

    it('refuses a missing document with 400', async () => {
      const meta = await createOk({ document: { keep: true } })
      expectError(await update(meta.id, {}), 400, /document/)
      expectError(await update(meta.id, { owner_id: null }), 400, /document/)
      expect((await readOne(meta.id)).document).toEqual({ keep: true })
    })

    it('answers 404 for an unknown document or vault, 400 for malformed ids', async () => {
      const meta = await createOk({ document: {} })
      expectError(await update(randomUUID(), { document: {} }), 404)
      expectError(await update(meta.id, { document: {} }, { vault: randomUUID() }), 404)
      expectError(await update('nope', { document: {} }), 400, /document_id/)
      expectError(await update(meta.id, { document: {} }, { vault: 'nope' }), 400, /vault_id/)
    })
  })

  describe('schema link', () => {
    let schema: string

    beforeAll(async () => {
      schema = await insertSchema(vault)
    })

    it('creates with a schema: the content must be an object', async () => {
      const meta = await createOk({ document: { name: 'x' }, schema_id: schema })
      expect(meta).toEqual({ id: meta.id, vault_id: vault, owner_id: null, schema_id: schema })
      expect(await readOne(meta.id)).toEqual({ ...meta, document: { name: 'x' } })
      for (const document of [['array'], 'string', 5, null]) {
        expectError(await create({ document, schema_id: schema }), 400, /^document /)
      }
    })

    it('refuses an unknown, foreign or malformed schema_id with 400 naming it', async () => {
      const elsewhere = await newVault()
      const foreign = await insertSchema(elsewhere)
      expectError(await create({ document: {}, schema_id: randomUUID() }), 400, /schema_id/)
      expectError(await create({ document: {}, schema_id: foreign }), 400, /schema_id/)
      expectError(await create({ document: {}, schema_id: 'abc' }), 400, /schema_id/)
      const meta = await createOk({ document: {} })
      expectError(
        await update(meta.id, { document: {}, schema_id: randomUUID() }),
        400,
        /schema_id/,
      )
    })

    it('keeps the schema when schema_id is omitted on update', async () => {
      const meta = await createOk({ document: { v: 1 }, schema_id: schema })
      expect(metaOf(await update(meta.id, { document: { v: 2 } })).schema_id).toBe(schema)
      expect(await readOne(meta.id)).toMatchObject({ schema_id: schema, document: { v: 2 } })
      expectError(await update(meta.id, { document: [1] }), 400, /^document /)
      expect((await readOne(meta.id)).document).toEqual({ v: 2 })
    })

    it('stays an object after the schema is detached', async () => {
      const meta = await createOk({ document: { v: 1 }, schema_id: schema })
      const detached = metaOf(await update(meta.id, { document: { v: 2 }, schema_id: null }))
      expect(detached.schema_id).toBeNull()
      expect(await readOne(meta.id)).toMatchObject({ schema_id: null, document: { v: 2 } })
      for (const document of [['no'], 'no', 1]) {
        expectError(await update(meta.id, { document }), 400, /^document /)
      }
      metaOf(await update(meta.id, { document: { v: 3 } }))
      expect((await readOne(meta.id)).document).toEqual({ v: 3 })
    })

    it('ties an unbound document to a schema on update (object content only)', async () => {
      const meta = await createOk({ document: ['free'] })
      expectError(
        await update(meta.id, { document: ['still'], schema_id: schema }),
        400,
        /^document /,
      )
      expect(await readOne(meta.id)).toMatchObject({ schema_id: null, document: ['free'] })
      const tied = metaOf(await update(meta.id, { document: { now: 'object' }, schema_id: schema }))
      expect(tied.schema_id).toBe(schema)
      expectError(await update(meta.id, { document: 'text', schema_id: null }), 400, /^document /)
    })

    it('an unbound document may hold any JSON across updates', async () => {
      const meta = await createOk({ document: { a: 1 } })
      metaOf(await update(meta.id, { document: 'text', schema_id: null }))
      expect((await readOne(meta.id)).document).toBe('text')
    })
  })

  describe('per-item answers', () => {
    let pv: string
    let owner: Awaited<ReturnType<typeof createUser>>
    let stranger: DocMeta
    let unowned: DocMeta

    beforeAll(async () => {
      pv = await newVault()
      owner = await createUser(t, {
        policy: [{ Resources: [`Vault::${pv}::Document::$[Owner=self]`], Activities: 'CRUD' }],
      })
      const someone = await createUser(t)
      stranger = await createOk({ document: { secret: 1 }, owner_id: someone.id }, { vault: pv })
      unowned = await createOk({ document: { secret: 2 } }, { vault: pv })
    })

    it('a caller with rights on their own documents uses them', async () => {
      const mine = await createOk({ document: { mine: true }, owner_id: owner.id }, { vault: pv })
      expect((await readOne(mine.id, { vault: pv, auth: owner.apiKey })).document).toEqual({
        mine: true,
      })
      metaOf(await update(mine.id, { document: { mine: 2 } }, { vault: pv, auth: owner.apiKey }))
      expect((await readOne(mine.id, { vault: pv })).document).toEqual({ mine: 2 })
      // Created by the owner themself, owned by them.
      const own = await createOk(
        { document: { by: 'owner' }, owner_id: owner.id },
        { vault: pv, auth: owner.apiKey },
      )
      expect(own.owner_id).toBe(owner.id)
    })

    it('a document the caller cannot read answers 404 on read and update, as a missing one', async () => {
      for (const d of [stranger, unowned]) {
        const r = expectError(await read(d.id, { vault: pv, auth: owner.apiKey }), 404)
        expect(r.type).toBe('not_found_error')
        expectError(await update(d.id, { document: {} }, { vault: pv, auth: owner.apiKey }), 404)
      }
      const mine = await createOk({ document: {}, owner_id: owner.id }, { vault: pv })
      expectError(await read([mine.id, stranger.id], { vault: pv, auth: owner.apiKey }), 404)
      expectError(await read(randomUUID(), { vault: pv, auth: owner.apiKey }), 404)
      expectError(
        await update(randomUUID(), { document: {} }, { vault: pv, auth: owner.apiKey }),
        404,
      )
      // Nothing changed.
      expect((await readOne(stranger.id, { vault: pv })).document).toEqual({ secret: 1 })
    })

    it('a caller who can read but not update gets 401 on update', async () => {
      const reader = await createUser(t, {
        policy: [
          { Resources: [`Vault::${pv}::Document::.*`], Activities: 'R' },
          { Resources: [`Vault::${pv}::Document::$[Owner=self]`], Activities: 'U' },
        ],
      })
      for (const d of [stranger, unowned]) {
        expect((await readOne(d.id, { vault: pv, auth: reader.apiKey })).id).toBe(d.id)
        const error = expectError(
          await update(d.id, { document: { hacked: true } }, { vault: pv, auth: reader.apiKey }),
          401,
        )
        expect(error.code).toBe('PERMISSION_DENIED')
      }
      // No U at all: refused by the route before any lookup.
      const readOnly = await createUser(t, {
        policy: [{ Resources: [`Vault::${pv}::Document::.*`], Activities: 'R' }],
      })
      expectError(
        await update(unowned.id, { document: {} }, { vault: pv, auth: readOnly.apiKey }),
        401,
      )
      expectError(await create({ document: {} }, { vault: pv, auth: readOnly.apiKey }), 401)
      expect((await readOne(unowned.id, { vault: pv })).document).toEqual({ secret: 2 })
    })

    it('creating needs C on the collection (ownerless) or on $[Owner=X]', async () => {
      expectError(await create({ document: {} }, { vault: pv, auth: owner.apiKey }), 401)
      expectError(
        await create(
          { document: {}, owner_id: stranger.owner_id },
          { vault: pv, auth: owner.apiKey },
        ),
        401,
      )
      const creator = await createUser(t, {
        policy: [{ Resources: [`Vault::${pv}::Document::`], Activities: 'C' }],
      })
      expect((await createOk({ document: {} }, { vault: pv, auth: creator.apiKey })).owner_id).toBe(
        null,
      )
    })

    it('rights in one vault reach nothing in another', async () => {
      const other = await createOk({ document: {}, owner_id: owner.id })
      expectError(await read(other.id, { auth: owner.apiKey }), 401)
      expectError(await update(other.id, { document: {} }, { auth: owner.apiKey }), 401)
    })
  })

  describe('cross-account', () => {
    let b: Admin
    let doc: DocMeta

    beforeAll(async () => {
      b = await t.newAccount()
      doc = await createOk({ document: { private: true } })
    })

    it('another account’s admin gets 404 for the vault and its documents', async () => {
      expectError(await create({ document: {} }, { auth: b.api_key }), 404)
      expectError(await read(doc.id, { auth: b.api_key }), 404)
      expectError(await update(doc.id, { document: { x: 1 } }, { auth: b.api_key }), 404)
      expectError(await t.api.get(`/v1/vaults/${vault}/documents`, { auth: b.api_key }), 404)
      expect((await readOne(doc.id)).document).toEqual({ private: true })
    })

    it('a document id read through one’s own vault is still a 404', async () => {
      const own = await newVault(b.api_key)
      expectError(await read(doc.id, { vault: own, auth: b.api_key }), 404)
      expectError(await update(doc.id, { document: {} }, { vault: own, auth: b.api_key }), 404)
    })

    it('a schema of another account is unknown', async () => {
      const own = await newVault(b.api_key)
      const theirSchema = await insertSchema(own, b.account_id)
      expectError(await create({ document: {}, schema_id: theirSchema }), 400, /schema_id/)
    })
  })
})
