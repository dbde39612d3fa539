import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { newId } from '../../src/lib/ids.js'
import {
  type Admin,
  b64,
  buildTestApp,
  type CallOptions,
  createUser,
  errorOf,
  type TestApp,
  unb64,
} from '../helpers/app.js'

/** Ruby's Base64.encode64: a newline every 60 characters and a trailing one. */
const rubyB64 = (value: unknown) => `${b64(value).replace(/(.{60})/g, '$1\n')}\n`

const LONG = { name: 'Ada Lovelace', note: 'x'.repeat(120), list: [1, 2, 3], nested: { ok: true } }

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp) {
  expect(res.statusCode, res.body).toBe(status)
  const error = errorOf(res)
  if (message) expect(error.message).toMatch(message)
  return error
}

function ok(res: LightMyRequestResponse) {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  expect(typeof body.transaction_id).toBe('string')
  return body
}

describe('documents v1 (deprecated) and the owner and delete endpoints', () => {
  let t: TestApp
  let admin: string
  let vault: string

  const newVault = async (auth = admin) => {
    const res = await t.api.post('/v1/vaults', { auth, form: { name: `v-${randomUUID()}` } })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().vault.id as string
  }

  const v1Create = (o: CallOptions, v = vault) =>
    t.api.post(`/v1/vaults/${v}/documents`, { auth: admin, ...o })

  /** Creates through v1 and returns the new id. */
  const v1CreateOk = async (o: CallOptions, v = vault) => {
    const body = ok(await v1Create(o, v))
    expect(Object.keys(body).sort()).toEqual(['document_id', 'result', 'transaction_id'])
    return body.document_id as string
  }

  const v1Read = (ids: string, o: { auth?: string; vault?: string } = {}) =>
    t.api.get(`/v1/vaults/${o.vault ?? vault}/documents/${ids}`, { auth: o.auth ?? admin })

  const v1Update = (id: string, o: CallOptions, v = vault) =>
    t.api.put(`/v1/vaults/${v}/documents/${id}`, { auth: admin, ...o })

  const setOwner = (id: string, o: CallOptions, v = vault) =>
    t.api.put(`/v1/vaults/${v}/documents/${id}/owner`, { auth: admin, ...o })

  const remove = (id: string, o: { auth?: string; vault?: string } = {}) =>
    t.api.delete(`/v1/vaults/${o.vault ?? vault}/documents/${id}`, { auth: o.auth ?? admin })

  /** The v2 view of one document (content as JSON). */
  async function v2(id: string, v = vault) {
    const body = ok(await t.api.get(`/v2/vaults/${v}/documents/${id}`, { auth: admin }))
    return body.documents[0] as {
      id: string
      owner_id: string | null
      schema_id: string | null
      document: unknown
    }
  }

  async function v2Create(json: unknown, v = vault) {
    return ok(await t.api.post(`/v2/vaults/${v}/documents`, { auth: admin, json }))
      .document_id as string
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

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
    vault = await newVault()
  })
  afterAll(() => t.close())

  describe('POST /v1/vaults/{v}/documents', () => {
    it('creates from an urlencoded base64 form and answers only document_id', async () => {
      const id = await v1CreateOk({ form: { document: b64({ a: 1 }) } })
      expect(await v2(id)).toEqual({
        id,
        vault_id: vault,
        owner_id: null,
        schema_id: null,
        document: { a: 1 },
      })
    })

    it('accepts Ruby-style base64 with embedded newlines', async () => {
      expect(rubyB64(LONG)).toContain('\n')
      const id = await v1CreateOk({ form: { document: rubyB64(LONG) } })
      expect((await v2(id)).document).toEqual(LONG)
    })

    it('accepts a multipart form (the official SDK)', async () => {
      const id = await v1CreateOk({ multipart: { document: b64(LONG) } })
      expect((await v2(id)).document).toEqual(LONG)
    })

    it('accepts the query string (the Ruby client) and a JSON body (Meteor)', async () => {
      const q = await v1CreateOk({ query: { document: rubyB64({ via: 'query' }) } })
      expect((await v2(q)).document).toEqual({ via: 'query' })
      const j = await v1CreateOk({ json: { document: b64({ via: 'json' }) } })
      expect((await v2(j)).document).toEqual({ via: 'json' })
    })

    it('reads an unescaped + in an urlencoded body (a space) as +', async () => {
      // Content whose base64 holds a '+', sent unescaped as some clients do.
      const content = { k: '>>>?' }
      const encoded = b64(content)
      expect(encoded).toContain('+')
      const res = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${vault}/documents`,
        headers: {
          authorization: `Basic ${Buffer.from(`${admin}:`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: `document=${encoded}`,
      })
      const id = ok(res).document_id
      expect((await v2(id)).document).toEqual(content)
    })

    it('stores any JSON value', async () => {
      for (const value of [[1, 2], 'text', 3]) {
        const id = await v1CreateOk({ form: { document: b64(value) } })
        expect((await v2(id)).document).toEqual(value)
      }
    })

    it('takes owner_id: a user, empty for ownerless, "null" for ownerless', async () => {
      const user = await createUser(t)
      const owned = await v1CreateOk({ form: { document: b64({}), owner_id: user.id } })
      expect((await v2(owned)).owner_id).toBe(user.id)
      const empty = await v1CreateOk({ form: { document: b64({}), owner_id: '' } })
      expect((await v2(empty)).owner_id).toBeNull()
      const nullText = await v1CreateOk({ multipart: { document: b64({}), owner_id: 'null' } })
      expect((await v2(nullText)).owner_id).toBeNull()
      expectError(
        await v1Create({ form: { document: b64({}), owner_id: randomUUID() } }),
        400,
        /owner_id/,
      )
      expectError(await v1Create({ form: { document: b64({}), owner_id: 'x' } }), 400, /owner_id/)
    })

    it('takes schema_id: the content must then be an object', async () => {
      const schema = await insertSchema(vault)
      const id = await v1CreateOk({ form: { document: b64({ s: 1 }), schema_id: schema } })
      expect((await v2(id)).schema_id).toBe(schema)
      expectError(
        await v1Create({ form: { document: b64([1]), schema_id: schema } }),
        400,
        /^document /,
      )
      expectError(
        await v1Create({ form: { document: b64({}), schema_id: randomUUID() } }),
        400,
        /schema_id/,
      )
    })

    it('refuses invalid base64, base64 of non-JSON and a missing document with 400', async () => {
      const notJson = Buffer.from('{not json').toString('base64')
      for (const document of ['!!!not base64!!!', 'abcde', notJson, '{"a":1}']) {
        const error = expectError(await v1Create({ form: { document } }), 400, /document/)
        expect(error.type).toBe('invalid_request_error')
      }
      expectError(await v1Create({ form: {} }), 400, /document/)
      expectError(await v1Create({ form: { document: '' } }), 400, /document/)
      expectError(await v1Create({}), 400, /document/)
    })

    it('answers 404 for an unknown vault and 401 without a credential', async () => {
      expectError(await v1Create({ form: { document: b64({}) } }, randomUUID()), 404)
      expectError(
        await t.api.post(`/v1/vaults/${vault}/documents`, { form: { document: b64({}) } }),
        401,
      )
    })
  })

  describe('GET /v1/vaults/{v}/documents/{ids}', () => {
    let a: string
    let b: string
    let owner: string
    const A = { a: 'first', ünï: 'cødé' }
    const B = ['second']

    beforeAll(async () => {
      owner = (await createUser(t)).id
      a = await v1CreateOk({ form: { document: b64(A), owner_id: owner } })
      b = await v1CreateOk({ form: { document: b64(B) } })
    })

    it('answers a single id with only the bare base64 text', async () => {
      const res = await v1Read(a)
      expect(res.statusCode, res.body).toBe(200)
      expect(res.headers['content-type']).toBe('application/octet-stream')
      expect(res.body).toMatch(/^[A-Za-z0-9+/]+=*$/)
      expect(res.body).not.toContain('result')
      expect(() => JSON.parse(res.body)).toThrow()
      expect(unb64(res.body)).toEqual(A)
      expect(res.headers['cache-control']).toBe('no-store')
    })

    it('answers two ids with documents [{id, document (base64), owner_id}] in order', async () => {
      const body = ok(await v1Read(`${b},${a}`))
      expect(body.documents).toHaveLength(2)
      const [first, second] = body.documents
      expect(first).toMatchObject({ id: b, owner_id: null })
      expect(second).toMatchObject({ id: a, owner_id: owner })
      expect(unb64(first.document)).toEqual(B)
      expect(unb64(second.document)).toEqual(A)
    })

    it('answers the same id twice in the array form (old SDKs forced it so)', async () => {
      const body = ok(await v1Read(`${a},${a}`))
      // Ids are de-duplicated: one entry (billing counts documents returned).
      expect(body.documents).toHaveLength(1)
      expect(body.documents[0]).toMatchObject({ id: a, owner_id: owner })
      expect(unb64(body.documents[0].document)).toEqual(A)
    })

    it('answers 404 for an unknown id, alone or among others', async () => {
      const alone = await v1Read(randomUUID())
      expect(expectError(alone, 404).type).toBe('not_found_error')
      expect(alone.headers['content-type']).toMatch(/json/)
      expectError(await v1Read(`${a},${randomUUID()}`), 404)
      expectError(await v1Read(a, { vault: randomUUID() }), 404)
    })

    it('answers 400 for a malformed id and for more than 100 ids', async () => {
      expectError(await v1Read('nope'), 400, /document_ids/)
      expectError(await v1Read(`${a},nope`), 400, /document_ids/)
      const ids = Array.from({ length: 101 }, () => randomUUID()).join(',')
      expectError(await v1Read(ids), 400, /document_ids/)
    })
  })

  describe('PUT /v1/vaults/{v}/documents/{id}', () => {
    it('replaces the content from a base64 form, keeping an omitted owner', async () => {
      const user = await createUser(t)
      const id = await v1CreateOk({ form: { document: b64({ v: 1 }), owner_id: user.id } })
      const body = ok(await v1Update(id, { form: { document: b64({ v: 2 }) } }))
      expect(body.document_id).toBe(id)
      expect(body.owner_id).toBe(user.id)
      expect(await v2(id)).toMatchObject({ owner_id: user.id, document: { v: 2 } })
      // Multipart and Ruby newlines too.
      ok(await v1Update(id, { multipart: { document: rubyB64(LONG) } }))
      expect(await v2(id)).toMatchObject({ owner_id: user.id, document: LONG })
    })

    it('owner_id empty or "null" makes it ownerless; a user id sets it', async () => {
      const user = await createUser(t)
      const id = await v1CreateOk({ form: { document: b64({}), owner_id: user.id } })
      expect(ok(await v1Update(id, { form: { document: b64({}), owner_id: '' } })).owner_id).toBe(
        null,
      )
      expect((await v2(id)).owner_id).toBeNull()
      expect(
        ok(await v1Update(id, { form: { document: b64({}), owner_id: user.id } })).owner_id,
      ).toBe(user.id)
      expect(
        ok(await v1Update(id, { multipart: { document: b64({ n: 1 }), owner_id: 'null' } }))
          .owner_id,
      ).toBeNull()
      expect(await v2(id)).toMatchObject({ owner_id: null, document: { n: 1 } })
      expectError(
        await v1Update(id, { form: { document: b64({}), owner_id: randomUUID() } }),
        400,
        /owner_id/,
      )
    })

    it('keeps the schema for an empty or omitted schema_id; content then stays an object', async () => {
      const schema = await insertSchema(vault)
      const id = await v2Create({ document: { s: 1 }, schema_id: schema })
      ok(await v1Update(id, { form: { document: b64({ s: 2 }), schema_id: '' } }))
      ok(await v1Update(id, { form: { document: b64({ s: 3 }) } }))
      expect(await v2(id)).toMatchObject({ schema_id: schema, document: { s: 3 } })
      expectError(await v1Update(id, { form: { document: b64([1]) } }), 400, /^document /)
      // Detached ("null" is what FormData makes of null): still an object only.
      ok(await v1Update(id, { multipart: { document: b64({ s: 4 }), schema_id: 'null' } }))
      expect((await v2(id)).schema_id).toBeNull()
      expectError(await v1Update(id, { form: { document: b64('text') } }), 400, /^document /)
    })

    it('refuses invalid base64 JSON or a missing document with 400; nothing changes', async () => {
      const id = await v1CreateOk({ form: { document: b64({ keep: 1 }) } })
      expectError(await v1Update(id, { form: { document: '***' } }), 400, /document/)
      expectError(
        await v1Update(id, { form: { document: Buffer.from('nope').toString('base64') } }),
        400,
        /document/,
      )
      expectError(await v1Update(id, { form: {} }), 400, /document/)
      expectError(await v1Update(id, { form: { owner_id: '' } }), 400, /document/)
      expect(await v2(id)).toMatchObject({ owner_id: null, document: { keep: 1 } })
    })

    it('answers 404 for an unknown document or vault', async () => {
      const id = await v1CreateOk({ form: { document: b64({}) } })
      expectError(await v1Update(randomUUID(), { form: { document: b64({}) } }), 404)
      expectError(await v1Update(id, { form: { document: b64({}) } }, randomUUID()), 404)
      expectError(await v1Update('bad', { form: { document: b64({}) } }), 400, /document_id/)
    })
  })

  describe('PUT /v1/vaults/{v}/documents/{id}/owner', () => {
    it('sets, changes and removes the owner; the content stays', async () => {
      const u1 = await createUser(t)
      const u2 = await createUser(t)
      const id = await v2Create({ document: { stay: true } })
      const set = ok(await setOwner(id, { form: { owner_id: u1.id } }))
      expect(set.document_id).toBe(id)
      expect(set.owner_id).toBe(u1.id)
      expect(set.document).toEqual({ id, vault_id: vault, owner_id: u1.id, schema_id: null })
      expect(ok(await setOwner(id, { multipart: { owner_id: u2.id } })).owner_id).toBe(u2.id)
      expect((await v2(id)).owner_id).toBe(u2.id)
      const removed = ok(await setOwner(id, { form: { owner_id: '' } }))
      expect(removed.owner_id).toBeNull()
      expect(removed.document.owner_id).toBeNull()
      expect(await v2(id)).toMatchObject({ owner_id: null, document: { stay: true } })
      ok(await setOwner(id, { query: { owner_id: u1.id } }))
      expect(ok(await setOwner(id, { multipart: { owner_id: 'null' } })).owner_id).toBeNull()
      // Setting the same owner again is no change.
      expect(ok(await setOwner(id, { form: { owner_id: '' } })).owner_id).toBeNull()
    })

    it('requires owner_id (400 when missing)', async () => {
      const u = await createUser(t)
      const id = await v2Create({ document: {}, owner_id: u.id })
      expectError(await setOwner(id, { form: {} }), 400, /owner_id/)
      expectError(await setOwner(id, {}), 400, /owner_id/)
      expect((await v2(id)).owner_id).toBe(u.id)
    })

    it('refuses an unknown or malformed owner with 400', async () => {
      const id = await v2Create({ document: {} })
      expectError(await setOwner(id, { form: { owner_id: randomUUID() } }), 400, /owner_id/)
      expectError(await setOwner(id, { form: { owner_id: 'someone' } }), 400, /owner_id/)
      const other = await t.newAccount()
      expectError(await setOwner(id, { form: { owner_id: other.userId } }), 400, /owner_id/)
      expect((await v2(id)).owner_id).toBeNull()
    })

    it('answers 404 for an unknown document or vault', async () => {
      const u = await createUser(t)
      expectError(await setOwner(randomUUID(), { form: { owner_id: u.id } }), 404)
      const id = await v2Create({ document: {} })
      expectError(await setOwner(id, { form: { owner_id: u.id } }, randomUUID()), 404)
    })
  })

  describe('DELETE /v1/vaults/{v}/documents/{id}', () => {
    it('answers {document_id, owner_id}; then the document is gone', async () => {
      const u = await createUser(t)
      const id = await v2Create({ document: { bye: 1 }, owner_id: u.id })
      const body = ok(await remove(id))
      expect(body.document_id).toBe(id)
      expect(body.owner_id).toBe(u.id)
      expect(Object.keys(body).sort()).toEqual([
        'document_id',
        'owner_id',
        'result',
        'transaction_id',
      ])
      expectError(await t.api.get(`/v2/vaults/${vault}/documents/${id}`, { auth: admin }), 404)
      expectError(await v1Read(id), 404)
      expectError(await remove(id), 404)
      expectError(await v1Update(id, { form: { document: b64({}) } }), 404)
    })

    it('answers owner_id null for an ownerless document', async () => {
      const id = await v2Create({ document: 1 })
      expect(ok(await remove(id))).toMatchObject({ document_id: id, owner_id: null })
    })

    it('answers 404 for an unknown document or vault, 400 for a malformed id', async () => {
      const id = await v2Create({ document: 1 })
      expectError(await remove(randomUUID()), 404)
      expectError(await remove(id, { vault: randomUUID() }), 404)
      expectError(await remove('1234'), 400, /document_id/)
      expect((await v2(id)).document).toBe(1)
    })
  })

  describe('per-item answers', () => {
    let pv: string
    let self: Awaited<ReturnType<typeof createUser>>
    let someone: Awaited<ReturnType<typeof createUser>>
    let theirs: string
    let unowned: string

    beforeAll(async () => {
      pv = await newVault()
      self = await createUser(t, {
        policy: [{ Resources: [`Vault::${pv}::Document::$[Owner=self]`], Activities: 'CRUD' }],
      })
      someone = await createUser(t)
      theirs = await v2Create({ document: { t: 1 }, owner_id: someone.id }, pv)
      unowned = await v2Create({ document: { u: 1 } }, pv)
    })

    it('a caller who cannot read a document gets 404 on read, update, owner and delete', async () => {
      for (const id of [theirs, unowned]) {
        expectError(await v1Read(id, { vault: pv, auth: self.apiKey }), 404)
        expectError(
          await v1Update(id, { auth: self.apiKey, form: { document: b64({ x: 1 }) } }, pv),
          404,
        )
        expectError(await setOwner(id, { auth: self.apiKey, form: { owner_id: self.id } }, pv), 404)
        expectError(await remove(id, { vault: pv, auth: self.apiKey }), 404)
      }
      expect(await v2(theirs, pv)).toMatchObject({ owner_id: someone.id, document: { t: 1 } })
      expect(await v2(unowned, pv)).toMatchObject({ owner_id: null, document: { u: 1 } })
    })

    it('the same caller uses their own documents', async () => {
      const mine = await v1CreateOk(
        { auth: self.apiKey, form: { document: b64({ m: 1 }), owner_id: self.id } },
        pv,
      )
      expect(unb64((await v1Read(mine, { vault: pv, auth: self.apiKey })).body)).toEqual({ m: 1 })
      ok(await v1Update(mine, { auth: self.apiKey, form: { document: b64({ m: 2 }) } }, pv))
      expect(ok(await remove(mine, { vault: pv, auth: self.apiKey })).owner_id).toBe(self.id)
    })

    it('a caller who can read but not change gets 401', async () => {
      const reader = await createUser(t, {
        policy: [
          { Resources: [`Vault::${pv}::Document::.*`], Activities: 'R' },
          { Resources: [`Vault::${pv}::Document::$[Owner=self]`], Activities: 'UD' },
        ],
      })
      for (const id of [theirs, unowned]) {
        expect(unb64((await v1Read(id, { vault: pv, auth: reader.apiKey })).body)).toBeTruthy()
        expectError(
          await v1Update(id, { auth: reader.apiKey, form: { document: b64({ x: 1 }) } }, pv),
          401,
        )
        expectError(
          await setOwner(id, { auth: reader.apiKey, form: { owner_id: reader.id } }, pv),
          401,
        )
        expectError(await remove(id, { vault: pv, auth: reader.apiKey }), 401)
      }
      expect(await v2(theirs, pv)).toMatchObject({ owner_id: someone.id, document: { t: 1 } })
    })

    it('a caller with no delete right anywhere is refused by the route (401)', async () => {
      const readOnly = await createUser(t, {
        policy: [{ Resources: [`Vault::${pv}::Document::.*`], Activities: 'R' }],
      })
      expectError(await remove(unowned, { vault: pv, auth: readOnly.apiKey }), 401)
      expectError(await remove(randomUUID(), { vault: pv, auth: readOnly.apiKey }), 401)
      expectError(
        await setOwner(unowned, { auth: readOnly.apiKey, form: { owner_id: '' } }, pv),
        401,
      )
    })
  })

  describe('cross-account', () => {
    let b: Admin
    let id: string

    beforeAll(async () => {
      b = await t.newAccount()
      id = await v2Create({ document: { mine: true } })
    })

    it('another account’s admin gets 404 on every v1 document route', async () => {
      const auth = b.api_key
      expectError(await v1Create({ auth, form: { document: b64({}) } }), 404)
      expectError(await v1Read(id, { auth }), 404)
      expectError(await v1Read(`${id},${id}`, { auth }), 404)
      expectError(await v1Update(id, { auth, form: { document: b64({}) } }), 404)
      expectError(await setOwner(id, { auth, form: { owner_id: '' } }), 404)
      expectError(await remove(id, { auth }), 404)
      expect((await v2(id)).document).toEqual({ mine: true })
    })
  })
})
