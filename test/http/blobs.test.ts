import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import { basicHeader, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import {
  type BlobStoreHarness,
  bytes,
  multipart,
  openBlobStore,
  type Part,
  STORE_KINDS,
  settledObjects,
} from '../helpers/blob-harness.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const KiB = 1024
const P = (Activities: string, ...Resources: string[]): PolicyStatement => ({
  Resources,
  Activities,
})
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2)}`
const file = (data: Buffer | string, filename = 'file.bin', type = 'application/octet-stream') =>
  ({ name: 'file', filename, type, data }) satisfies Part

describe.each(STORE_KINDS)('BLOB endpoints over inject (%s store)', (kind) => {
  let h: BlobStoreHarness
  let t: TestApp
  let auth: string

  beforeAll(async () => {
    h = await openBlobStore(kind)
    t = await buildTestApp({ blobStore: h.store })
    auth = t.admin.api_key
  })
  afterAll(async () => {
    await t?.close()
    await h?.close()
  })
  // After every case, failing ones included, the store holds exactly the objects of the rows.
  afterEach(async () => {
    const { objects, rows } = await settledObjects(h, t)
    expect(objects).toEqual(rows)
  })

  const newVault = async () => {
    const res = await t.api.post('/v1/vaults', { auth, form: { name: unique('vault') } })
    expect(res.statusCode).toBe(200)
    return res.json().vault.id as string
  }

  const send = (
    method: 'POST' | 'PUT',
    url: string,
    parts: Part[],
    credential: string | null = auth,
  ): Promise<LightMyRequestResponse> => {
    const m = multipart(parts)
    return t.app.inject({
      method,
      url,
      headers: {
        'content-type': m.contentType,
        ...(credential === null ? {} : { authorization: basicHeader(credential) }),
      },
      payload: m.payload,
    })
  }
  const upload = (vaultId: string, parts: Part[], credential?: string | null) =>
    send('POST', `/v1/vaults/${vaultId}/blobs`, parts, credential)
  const replace = (vaultId: string, blobId: string, parts: Part[], credential?: string | null) =>
    send('PUT', `/v1/vaults/${vaultId}/blobs/${blobId}`, parts, credential)
  const download = (vaultId: string, blobId: string, credential = auth) =>
    t.api.get(`/v1/vaults/${vaultId}/blobs/${blobId}`, { auth: credential })
  const rowOf = (blobId: string) =>
    t.deps.store.db
      .selectFrom('blobs')
      .selectAll()
      .where('id', '=', blobId)
      .executeTakeFirstOrThrow()

  /** Uploads and returns the new BLOB's id (asserting success). */
  const uploaded = async (vaultId: string, parts: Part[], credential?: string) => {
    const res = await upload(vaultId, parts, credential)
    expect(res.statusCode, res.body).toBe(200)
    return res.json().blob_id as string
  }

  describe('upload', () => {
    it('answers the flat fields and the nested blob, sizes as strings', async () => {
      const v = await newVault()
      const puts = h.store.puts
      const res = await upload(v, [file('hello world', 'hello.txt', 'text/plain')])
      expect(res.statusCode).toBe(200)
      const body = res.json()
      expect(body.result).toBe('success')
      expect(body.transaction_id).toMatch(UUID)
      expect(body.blob_id).toMatch(UUID)
      expect(body).toMatchObject({
        blob_filename: 'hello.txt',
        blob_size: '11',
        owner_id: null,
      })
      expect(body.blob).toEqual({
        id: body.blob_id,
        blob_id: body.blob_id,
        filename: 'hello.txt',
        name: 'hello.txt',
        size: '11',
        mime_type: 'text/plain',
        vault_id: v,
        owner_id: null,
        metadata_document_id: null,
      })
      expect(h.store.puts).toBe(puts + 1)
      // The stored object is not the plaintext: content is encrypted at rest.
      const row = await rowOf(body.blob_id)
      expect(Number(row.size)).toBe(11)
      const stored = await h.store.get(row.object_key)
      const chunks: Buffer[] = []
      for await (const c of stored) chunks.push(c as Buffer)
      expect(Buffer.concat(chunks).includes('hello world')).toBe(false)
    })

    it('takes the MIME type from the file part', async () => {
      const v = await newVault()
      for (const type of ['image/png', 'application/pdf', 'text/csv; charset=utf-8']) {
        const res = await upload(v, [file('x', 'x', type)])
        expect(res.json().blob.mime_type).toBe(type.split(';')[0])
      }
      // A part without Content-Type is text/plain (RFC 7578 §4.4).
      const m = multipart([{ name: 'file', filename: 'plain', data: 'abc' }])
      const res = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${v}/blobs`,
        headers: { authorization: basicHeader(auth), 'content-type': m.contentType },
        payload: m.payload,
      })
      expect(res.json().blob.mime_type).toBe('text/plain')
    })

    it('takes owner_id before or after the file part', async () => {
      const v = await newVault()
      const owner = await createUser(t)
      const before = await upload(v, [{ name: 'owner_id', value: owner.id }, file('a')])
      const after = await upload(v, [file('b'), { name: 'owner_id', value: owner.id }])
      for (const res of [before, after]) {
        expect(res.statusCode, res.body).toBe(200)
        expect(res.json().owner_id).toBe(owner.id)
        expect(res.json().blob.owner_id).toBe(owner.id)
      }
      // Upper-case UUIDs are the same user.
      const upper = await upload(v, [
        file('c'),
        { name: 'owner_id', value: owner.id.toUpperCase() },
      ])
      expect(upper.json().owner_id).toBe(owner.id)
    })

    it('makes an ownerless BLOB when owner_id is empty, "null" or omitted', async () => {
      const v = await newVault()
      for (const parts of [
        [file('a'), { name: 'owner_id', value: '' }],
        [{ name: 'owner_id', value: 'null' }, file('a')],
        [file('a')],
      ]) {
        const res = await upload(v, parts)
        expect(res.statusCode, res.body).toBe(200)
        expect(res.json().owner_id).toBeNull()
        expect(res.json().blob.owner_id).toBeNull()
      }
    })

    it('refuses an unknown or malformed owner with 400 and keeps no object', async () => {
      const v = await newVault()
      for (const value of [randomUUID(), 'not-a-uuid']) {
        for (const parts of [
          [file(bytes(100 * KiB)), { name: 'owner_id', value }],
          [{ name: 'owner_id', value }, file(bytes(100 * KiB))],
        ]) {
          const res = await upload(v, parts)
          expect(res.statusCode).toBe(400)
          expect(errorOf(res)).toMatchObject({ type: 'invalid_request_error' })
          expect(errorOf(res).message).toContain('owner_id')
        }
      }
      // A user of another account is unknown here.
      const other = await t.newAccount()
      const res = await upload(v, [file('x'), { name: 'owner_id', value: other.userId }])
      expect(res.statusCode).toBe(400)
    })

    it('needs a file part', async () => {
      const v = await newVault()
      const owner = await createUser(t)
      const puts = h.store.puts
      for (const parts of [
        [{ name: 'owner_id', value: owner.id }],
        [] as Part[],
        // A part named `file` without a filename is a text field, not a file.
        [{ name: 'file', value: 'just text' }],
      ]) {
        const res = await upload(v, parts)
        expect(res.statusCode).toBe(400)
        expect(errorOf(res)).toMatchObject({ type: 'invalid_request_error' })
        expect(errorOf(res).message).toContain('file')
      }
      expect(h.store.puts).toBe(puts)
    })

    it('refuses a second file part and removes the first', async () => {
      const v = await newVault()
      const puts = h.store.puts
      const res = await upload(v, [file(bytes(70 * KiB), 'one'), file(bytes(10), 'two')])
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toContain('file')
      expect(h.store.puts).toBe(puts + 1)
    })

    it('refuses a file under any other field name', async () => {
      const v = await newVault()
      const puts = h.store.puts
      for (const name of ['upload', 'files', 'File']) {
        const res = await upload(v, [{ name, filename: 'x.txt', type: 'text/plain', data: 'x' }])
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toContain(name)
      }
      // Also after a good file part: the good one is removed again.
      const res = await upload(v, [file('ok'), { name: 'other', filename: 'y', data: 'y' }])
      expect(res.statusCode).toBe(400)
      expect(h.store.puts).toBe(puts + 1)
    })

    it('limits the filename to 255 characters, before storing anything', async () => {
      const v = await newVault()
      const puts = h.store.puts
      const long = await upload(v, [file(bytes(1000), 'n'.repeat(256))])
      expect(long.statusCode).toBe(400)
      expect(errorOf(long).message).toContain('255')
      expect(h.store.puts).toBe(puts)
      const max = await upload(v, [file('ok', `${'m'.repeat(251)}.txt`)])
      expect(max.statusCode).toBe(200)
      expect(max.json().blob_filename).toHaveLength(255)
      const got = await download(v, max.json().blob_id)
      expect(got.headers['content-disposition']).toContain(`filename="${'m'.repeat(251)}.txt"`)
      // 255 characters, not bytes: a multi-byte name of 255 characters is fine.
      const wide = await upload(v, [file('ok', 'é'.repeat(255))])
      expect(wide.statusCode, wide.body).toBe(200)
      expect(wide.json().blob_filename).toBe('é'.repeat(255))
    })

    it('refuses a urlencoded body or none; takes JSON and raw bodies as the file', async () => {
      const v = await newVault()
      const puts = h.store.puts
      const form = await t.api.post(`/v1/vaults/${v}/blobs`, { auth, form: { file: 'abc' } })
      const none = await t.api.post(`/v1/vaults/${v}/blobs`, { auth })
      for (const res of [form, none]) {
        expect(res.statusCode).toBe(400)
        expect(errorOf(res)).toMatchObject({ type: 'invalid_request_error' })
        expect(errorOf(res).message).toContain('multipart')
      }
      expect(h.store.puts).toBe(puts)
      // Older clients send the file as the raw body (blobs-raw.test.ts): JSON is a file too.
      const json = await t.api.post(`/v1/vaults/${v}/blobs`, { auth, json: { file: 'abc' } })
      expect(json.statusCode).toBe(200)
      expect(json.json()).toMatchObject({
        blob_size: '14',
        blob: { mime_type: 'application/json' },
      })
      const raw = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${v}/blobs`,
        headers: { authorization: basicHeader(auth), 'content-type': 'application/octet-stream' },
        payload: bytes(1000),
      })
      expect(raw.statusCode).toBe(200)
      expect(raw.json().blob_size).toBe('1000')
      const stored = h.store.puts
      // A multipart content type without a boundary, and a truncated body.
      const noBoundary = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${v}/blobs`,
        headers: { authorization: basicHeader(auth), 'content-type': 'multipart/form-data' },
        payload: 'x',
      })
      expect(noBoundary.statusCode).toBe(400)
      expect(errorOf(noBoundary).code).toBe('INVALID_MULTIPART')
      const m = multipart([file(bytes(200 * KiB))])
      const truncated = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${v}/blobs`,
        headers: { authorization: basicHeader(auth), 'content-type': m.contentType },
        payload: m.payload.subarray(0, 150 * KiB),
      })
      expect(truncated.statusCode).toBe(400)
      expect(errorOf(truncated).code).toBe('INVALID_MULTIPART')
      // A body cut off inside a text part.
      const cut = multipart([{ name: 'owner_id', value: '' }])
      const cutField = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${v}/blobs`,
        headers: { authorization: basicHeader(auth), 'content-type': cut.contentType },
        payload: cut.payload.subarray(0, 40),
      })
      expect(cutField.statusCode).toBe(400)
      expect(errorOf(cutField).code).toBe('INVALID_MULTIPART')
      expect(h.store.puts - stored).toBeLessThanOrEqual(1)
    })

    it('answers 404 for an unknown vault and stores nothing', async () => {
      const puts = h.store.puts
      const res = await upload(randomUUID(), [file(bytes(1000))])
      expect(res.statusCode).toBe(404)
      expect(errorOf(res)).toMatchObject({ type: 'not_found_error' })
      // A vault of another account is unknown too.
      const other = await t.newAccount()
      const theirs = await t.api.post('/v1/vaults', {
        auth: other.api_key,
        form: { name: unique('theirs') },
      })
      const res2 = await upload(theirs.json().vault.id, [file('x')])
      expect(res2.statusCode).toBe(404)
      expect(h.store.puts).toBe(puts)
      const bad = await upload('not-a-uuid', [file('x')])
      expect(bad.statusCode).toBe(400)
    })

    it('stores an empty file', async () => {
      const v = await newVault()
      const res = await upload(v, [file(Buffer.alloc(0), 'empty.txt', 'text/plain')])
      expect(res.statusCode).toBe(200)
      expect(res.json()).toMatchObject({ blob_size: '0', blob: { size: '0' } })
      const got = await download(v, res.json().blob_id)
      expect(got.statusCode).toBe(200)
      expect(got.rawPayload).toHaveLength(0)
      expect(got.headers['content-length']).toBe('0')
      expect(got.headers['content-type']).toMatch(/^text\/plain/)
    })

    it('refuses anonymous and rightless callers before reading the body', async () => {
      const v = await newVault()
      const puts = h.store.puts
      const anon = await upload(v, [file('x')], null)
      expect(anon.statusCode).toBe(401)
      expect(errorOf(anon).type).toBe('authentication_error')
      const nobody = await createUser(t)
      const denied = await upload(v, [file('x')], nobody.apiKey)
      expect(denied.statusCode).toBe(401)
      expect(errorOf(denied)).toMatchObject({ code: 'PERMISSION_DENIED' })
      // Read-only callers may not create.
      const reader = await createUser(t, { policy: [P('R', `Vault::${v}::Blob::.*`)] })
      const ro = await upload(v, [file('x')], reader.apiKey)
      expect(ro.statusCode).toBe(401)
      expect(h.store.puts).toBe(puts)
    })

    it('checks the owner rule once the owner is known, removing the stored object', async () => {
      const v = await newVault()
      const self = await createUser(t, { policy: [P('CR', `Vault::${v}::Blob::$[Owner=self]`)] })
      const mine = await upload(
        v,
        [file('mine'), { name: 'owner_id', value: self.id }],
        self.apiKey,
      )
      expect(mine.statusCode, mine.body).toBe(200)
      const { puts, deletes } = h.store
      // Ownerless, or owned by someone else: not allowed by an $[Owner=self] grant.
      for (const parts of [
        [file(bytes(80 * KiB))],
        [file(bytes(80 * KiB)), { name: 'owner_id', value: t.admin.userId }],
      ]) {
        const res = await upload(v, parts, self.apiKey)
        expect(res.statusCode).toBe(401)
        expect(errorOf(res)).toMatchObject({ code: 'PERMISSION_DENIED' })
      }
      expect(h.store.puts).toBe(puts + 2)
      expect(h.store.deletes).toBe(deletes + 2)
    })
  })

  describe('download', () => {
    it.each([1, 1000, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 3 * 64 * KiB, 1024 * KiB + 7])(
      'returns the %i raw bytes as uploaded, outside any envelope',
      async (size) => {
        const v = await newVault()
        const data = bytes(size, size)
        const id = await uploaded(v, [file(data, 'data.bin', 'application/x-custom')])
        const res = await download(v, id)
        expect(res.statusCode).toBe(200)
        expect(Buffer.compare(res.rawPayload, data)).toBe(0)
        expect(res.headers['content-type']).toBe('application/x-custom')
        expect(res.headers['content-length']).toBe(String(size))
        expect(res.headers['content-disposition']).toBe(
          `attachment; filename="data.bin"; filename*=UTF-8''data.bin`,
        )
        expect(res.headers['cache-control']).toBe('no-store')
        expect(res.headers['x-content-type-options']).toBe('nosniff')
      },
    )

    it('returns JSON-looking content as it was, not wrapped', async () => {
      const v = await newVault()
      const content = '{"hello":"world"}'
      const id = await uploaded(v, [file(content, 'doc.json', 'application/json')])
      const res = await download(v, id)
      expect(res.body).toBe(content)
      expect(res.headers['content-type']).toMatch(/^application\/json/)
    })

    it('names the file in Content-Disposition, with filename* for non-ASCII names', async () => {
      const v = await newVault()
      const cases: [string, string][] = [
        [
          'report 2024.pdf',
          `attachment; filename="report 2024.pdf"; filename*=UTF-8''report%202024.pdf`,
        ],
        [
          'résumé (1).txt',
          `attachment; filename="r_sum_ (1).txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%281%29.txt`,
        ],
        ['数据.csv', `attachment; filename="__.csv"; filename*=UTF-8''%E6%95%B0%E6%8D%AE.csv`],
        ["it's.txt", `attachment; filename="it's.txt"; filename*=UTF-8''it%27s.txt`],
      ]
      for (const [name, header] of cases) {
        const up = await upload(v, [file('x', name)])
        expect(up.statusCode, up.body).toBe(200)
        expect(up.json().blob_filename).toBe(name)
        const res = await download(v, up.json().blob_id)
        expect(res.headers['content-disposition']).toBe(header)
        // A client decoding filename* gets the original name back.
        const star = /filename\*=UTF-8''(.*)$/.exec(res.headers['content-disposition'] as string)
        expect(decodeURIComponent(star?.[1] ?? '')).toBe(name)
      }
      const unnamed = await uploaded(v, [file('x', '')])
      expect((await download(v, unnamed)).headers['content-disposition']).toBe('attachment')
    })

    it('answers 404 for an unknown BLOB or vault, 400 for a malformed id', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('x')])
      const unknown = await download(v, randomUUID())
      expect(unknown.statusCode).toBe(404)
      expect(errorOf(unknown).type).toBe('not_found_error')
      expect((await download(randomUUID(), id)).statusCode).toBe(404)
      // The BLOB exists, but in another vault.
      const w = await newVault()
      expect((await download(w, id)).statusCode).toBe(404)
      expect((await download(v, 'nope')).statusCode).toBe(400)
    })

    it('refuses callers without R: 401 without any grant, 404 for an unreadable item', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('secret')])
      const nobody = await createUser(t)
      const r1 = await download(v, id, nobody.apiKey)
      expect(r1.statusCode).toBe(401)
      expect(errorOf(r1).code).toBe('PERMISSION_DENIED')
      // Rights on another vault's BLOBs only: the route rule fails, 401.
      const w = await newVault()
      const elsewhere = await createUser(t, { policy: [P('R', `Vault::${w}::Blob::.*`)] })
      const r2 = await download(v, id, elsewhere.apiKey)
      expect(r2.statusCode).toBe(401)
      // R on owned BLOBs only: the ownerless one cannot be seen, as if missing.
      const self = await createUser(t, { policy: [P('CR', `Vault::${v}::Blob::$[Owner=self]`)] })
      const r3 = await download(v, id, self.apiKey)
      expect(r3.statusCode).toBe(404)
      expect(r3.body).not.toContain('secret')
      const own = await uploaded(
        v,
        [file('own'), { name: 'owner_id', value: self.id }],
        self.apiKey,
      )
      expect((await download(v, own, self.apiKey)).body).toBe('own')
      // R on this very BLOB.
      const item = await createUser(t, { policy: [P('R', `Vault::${v}::Blob::${id}`)] })
      expect((await download(v, id, item.apiKey)).body).toBe('secret')
    })
  })

  describe('list', () => {
    it('lists the vault BLOBs in upload order with page fields', async () => {
      const v = await newVault()
      const ids: string[] = []
      for (let i = 0; i < 5; i++)
        ids.push(await uploaded(v, [file(bytes(i * 10), `f${i}.bin`, 'image/png')]))
      await uploaded(await newVault(), [file('other vault')])
      const res = await t.api.get(`/v1/vaults/${v}/blobs`, { auth })
      expect(res.statusCode).toBe(200)
      const data = res.json().data
      expect(data).toMatchObject({ page: 1, per_page: 100, total: 5 })
      expect(data.items.map((b: { id: string }) => b.id)).toEqual(ids)
      expect(data.items[3]).toEqual({
        id: ids[3],
        blob_id: ids[3],
        filename: 'f3.bin',
        name: 'f3.bin',
        size: '30',
        mime_type: 'image/png',
        vault_id: v,
        owner_id: null,
        metadata_document_id: null,
      })
    })

    it('pages', async () => {
      const v = await newVault()
      const ids: string[] = []
      for (let i = 0; i < 5; i++) ids.push(await uploaded(v, [file(`${i}`)]))
      const page = async (query: Record<string, string>) => {
        const res = await t.api.get(`/v1/vaults/${v}/blobs`, { auth, query })
        expect(res.statusCode, res.body).toBe(200)
        return res.json().data
      }
      const p2 = await page({ page: '2', per_page: '2' })
      expect(p2).toMatchObject({ page: 2, per_page: 2, total: 5 })
      expect(p2.items.map((b: { id: string }) => b.id)).toEqual(ids.slice(2, 4))
      const p3 = await page({ page: '3', per_page: '2' })
      expect(p3.items.map((b: { id: string }) => b.id)).toEqual(ids.slice(4))
      const past = await page({ page: '9', per_page: '2' })
      expect(past).toMatchObject({ items: [], total: 5 })
      const bad: Record<string, string>[] = [
        { page: '0' },
        { per_page: '0' },
        { per_page: '501' },
        { page: 'x' },
      ]
      for (const query of bad) {
        const res = await t.api.get(`/v1/vaults/${v}/blobs`, { auth, query })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).type).toBe('invalid_request_error')
      }
      expect((await t.api.get(`/v1/vaults/${randomUUID()}/blobs`, { auth })).statusCode).toBe(404)
      const empty = await t.api.get(`/v1/vaults/${await newVault()}/blobs`, { auth })
      expect(empty.json().data).toEqual({ items: [], page: 1, per_page: 100, total: 0 })
    })

    it('counts and lists only the BLOBs the caller may read', async () => {
      const v = await newVault()
      const self = await createUser(t, { policy: [P('CR', `Vault::${v}::Blob::$[Owner=self]`)] })
      const other = await createUser(t)
      await uploaded(v, [file('unowned')])
      const mine1 = await uploaded(v, [file('m1'), { name: 'owner_id', value: self.id }])
      await uploaded(v, [file('theirs'), { name: 'owner_id', value: other.id }])
      const mine2 = await uploaded(
        v,
        [file('m2'), { name: 'owner_id', value: self.id }],
        self.apiKey,
      )
      const res = await t.api.get(`/v1/vaults/${v}/blobs`, {
        auth: self.apiKey,
        query: { per_page: '1' },
      })
      expect(res.statusCode).toBe(200)
      expect(res.json().data).toMatchObject({ total: 2, per_page: 1 })
      expect(res.json().data.items.map((b: { id: string }) => b.id)).toEqual([mine1])
      const all = await t.api.get(`/v1/vaults/${v}/blobs`, { auth: self.apiKey })
      expect(all.json().data.items.map((b: { id: string }) => b.id)).toEqual([mine1, mine2])
      expect((await t.api.get(`/v1/vaults/${v}/blobs`, { auth })).json().data.total).toBe(4)
      const nobody = await createUser(t)
      const denied = await t.api.get(`/v1/vaults/${v}/blobs`, { auth: nobody.apiKey })
      expect(denied.statusCode).toBe(401)
    })
  })

  describe('update', () => {
    it('replaces the content, name and type, and removes the old object', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file(bytes(70 * KiB, 1), 'old.txt', 'text/plain')])
      const oldKey = (await rowOf(id)).object_key
      const objectsBefore = await h.objects()
      const data = bytes(130 * KiB + 3, 2)
      const res = await replace(v, id, [file(data, 'new.png', 'image/png')])
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json()).toMatchObject({
        blob_id: id,
        blob_filename: 'new.png',
        blob_size: String(data.length),
        owner_id: null,
        blob: { id, filename: 'new.png', size: String(data.length), mime_type: 'image/png' },
      })
      const got = await download(v, id)
      expect(Buffer.compare(got.rawPayload, data)).toBe(0)
      expect(got.headers['content-type']).toBe('image/png')
      expect(got.headers['content-disposition']).toContain('filename="new.png"')
      const newKey = (await rowOf(id)).object_key
      expect(newKey).not.toBe(oldKey)
      const objectsAfter = await h.objects()
      expect(objectsAfter).toHaveLength(objectsBefore.length)
      expect(objectsAfter).not.toContain(oldKey)
      expect(objectsAfter).toContain(newKey)
      // Twice more: still one object per row.
      await replace(v, id, [file('third', 'n3')])
      await replace(v, id, [{ name: 'owner_id', value: '' }, file('fourth', 'n4')])
      expect(await h.objects()).toHaveLength(objectsBefore.length)
      expect((await download(v, id)).body).toBe('fourth')
    })

    it('keeps the owner when owner_id is omitted, removes it when empty or "null"', async () => {
      const v = await newVault()
      const owner = await createUser(t)
      const id = await uploaded(v, [file('a'), { name: 'owner_id', value: owner.id }])
      const kept = await replace(v, id, [file('b')])
      expect(kept.json()).toMatchObject({ owner_id: owner.id, blob: { owner_id: owner.id } })
      const emptied = await replace(v, id, [file('c'), { name: 'owner_id', value: '' }])
      expect(emptied.json()).toMatchObject({ owner_id: null, blob: { owner_id: null } })
      await replace(v, id, [{ name: 'owner_id', value: owner.id }])
      const nulled = await replace(v, id, [{ name: 'owner_id', value: 'null' }, file('d')])
      expect(nulled.json().owner_id).toBeNull()
      expect((await download(v, id)).body).toBe('d')
    })

    it('changes only the owner when no file is sent', async () => {
      const v = await newVault()
      const owner = await createUser(t)
      const id = await uploaded(v, [file('content', 'keep.txt', 'text/plain')])
      const before = await rowOf(id)
      const puts = h.store.puts
      const res = await replace(v, id, [{ name: 'owner_id', value: owner.id }])
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json()).toMatchObject({
        blob_id: id,
        blob_filename: 'keep.txt',
        blob_size: '7',
        owner_id: owner.id,
        blob: { mime_type: 'text/plain', owner_id: owner.id },
      })
      const after = await rowOf(id)
      expect(after.object_key).toBe(before.object_key)
      expect(h.store.puts).toBe(puts)
      expect((await download(v, id)).body).toBe('content')
    })

    it('needs a file or owner_id, and a known BLOB', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('x')])
      const none = await replace(v, id, [])
      expect(none.statusCode).toBe(400)
      expect(errorOf(none).message).toContain('file')
      const puts = h.store.puts
      const unknown = await replace(v, randomUUID(), [file(bytes(1000))])
      expect(unknown.statusCode).toBe(404)
      expect((await replace(randomUUID(), id, [file('x')])).statusCode).toBe(404)
      expect(h.store.puts).toBe(puts)
      const notMultipart = await t.api.put(`/v1/vaults/${v}/blobs/${id}`, {
        auth,
        form: { owner_id: '' },
      })
      expect(notMultipart.statusCode).toBe(400)
    })

    it('keeps the old content when the new owner is refused', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('original', 'o.txt', 'text/plain')])
      const key = (await rowOf(id)).object_key
      const { puts, deletes } = h.store
      for (const value of [randomUUID(), 'bad']) {
        const res = await replace(v, id, [file(bytes(90 * KiB), 'n'), { name: 'owner_id', value }])
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toContain('owner_id')
      }
      expect(h.store.puts).toBe(puts + 2)
      expect(h.store.deletes).toBe(deletes + 2)
      expect((await rowOf(id)).object_key).toBe(key)
      const got = await download(v, id)
      expect(got.body).toBe('original')
      expect(got.headers['content-disposition']).toContain('o.txt')
    })

    it('refuses a new file part that breaks the rules and keeps the old content', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('original')])
      const puts = h.store.puts
      const long = await replace(v, id, [file('x', 'n'.repeat(256))])
      expect(long.statusCode).toBe(400)
      expect(h.store.puts).toBe(puts)
      const twice = await replace(v, id, [file('x', 'a'), file('y', 'b')])
      expect(twice.statusCode).toBe(400)
      const other = await replace(v, id, [{ name: 'blob', filename: 'z', data: 'z' }])
      expect(other.statusCode).toBe(400)
      expect((await download(v, id)).body).toBe('original')
    })

    it('refuses a caller without U before storing anything', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('original')])
      const puts = h.store.puts
      // Only R: the route rule (U somewhere in the vault's BLOBs) fails before the body is read.
      const reader = await createUser(t, { policy: [P('R', `Vault::${v}::Blob::.*`)] })
      const r1 = await replace(v, id, [file(bytes(200 * KiB))], reader.apiKey)
      expect(r1.statusCode).toBe(401)
      expect(errorOf(r1).code).toBe('PERMISSION_DENIED')
      // U on own BLOBs and R on all: this ownerless one is readable but not writable.
      const self = await createUser(t, {
        policy: [P('R', `Vault::${v}::Blob::.*`), P('CRU', `Vault::${v}::Blob::$[Owner=self]`)],
      })
      const r2 = await replace(v, id, [file(bytes(200 * KiB))], self.apiKey)
      expect(r2.statusCode).toBe(401)
      expect(errorOf(r2).code).toBe('PERMISSION_DENIED')
      // U on own BLOBs only: this one is not even visible.
      const blind = await createUser(t, { policy: [P('CRU', `Vault::${v}::Blob::$[Owner=self]`)] })
      const r3 = await replace(v, id, [file(bytes(200 * KiB))], blind.apiKey)
      expect(r3.statusCode).toBe(404)
      expect(h.store.puts).toBe(puts)
      expect((await download(v, id)).body).toBe('original')
      // Their own BLOB they may replace.
      const own = await uploaded(v, [file('a'), { name: 'owner_id', value: self.id }])
      const ok = await replace(v, own, [file('b')], self.apiKey)
      expect(ok.statusCode, ok.body).toBe(200)
      expect(ok.json().owner_id).toBe(self.id)
    })

    it('needs the ownership rules, not U, to change the owner', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('x')])
      // U on everything is not enough to take an ownerless BLOB.
      const updater = await createUser(t, { policy: [P('RU', `Vault::${v}::Blob::.*`)] })
      const res = await replace(v, id, [{ name: 'owner_id', value: updater.id }], updater.apiKey)
      expect(res.statusCode).toBe(401)
      // D on the item and C on $[Owner=self]: enough, without U.
      const taker = await createUser(t, {
        policy: [P('RD', `Vault::${v}::Blob::${id}`), P('C', `Vault::${v}::Blob::$[Owner=self]`)],
      })
      const taken = await replace(v, id, [{ name: 'owner_id', value: taker.id }], taker.apiKey)
      expect(taken.statusCode, taken.body).toBe(200)
      expect(taken.json()).toMatchObject({ owner_id: taker.id, blob_size: '1' })
      // ...but without U they still may not send new content, and nothing is stored.
      const puts = h.store.puts
      const content = await replace(v, id, [file(bytes(100 * KiB))], taker.apiKey)
      expect(content.statusCode).toBe(401)
      expect(h.store.puts).toBe(puts)
      expect((await download(v, id)).body).toBe('x')
    })
  })

  describe('owner endpoint', () => {
    const setOwner = (v: string, id: string, form?: Record<string, string>, credential = auth) =>
      t.api.put(`/v1/vaults/${v}/blobs/${id}/owner`, {
        auth: credential,
        ...(form ? { form } : {}),
      })

    it('sets, changes and removes the owner', async () => {
      const v = await newVault()
      const a = await createUser(t)
      const b = await createUser(t)
      const id = await uploaded(v, [file('x', 'x.txt', 'text/plain')])
      const key = (await rowOf(id)).object_key
      const set = await setOwner(v, id, { owner_id: a.id })
      expect(set.statusCode, set.body).toBe(200)
      expect(set.json()).toMatchObject({
        result: 'success',
        blob_id: id,
        owner_id: a.id,
        blob: { id, owner_id: a.id, filename: 'x.txt', size: '1', mime_type: 'text/plain' },
      })
      // Multipart works too (the SDK sends every v1 body so).
      const changed = await t.api.put(`/v1/vaults/${v}/blobs/${id}/owner`, {
        auth,
        multipart: { owner_id: b.id },
      })
      expect(changed.json().owner_id).toBe(b.id)
      const removed = await setOwner(v, id, { owner_id: '' })
      expect(removed.json()).toMatchObject({ owner_id: null, blob: { owner_id: null } })
      expect((await rowOf(id)).object_key).toBe(key)
      expect((await download(v, id)).body).toBe('x')
    })

    it('needs owner_id and a known user and BLOB', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('x')])
      const missing = await setOwner(v, id)
      expect(missing.statusCode).toBe(400)
      expect(errorOf(missing).message).toContain('owner_id')
      const other = await setOwner(v, id, { something: 'else' })
      expect(other.statusCode).toBe(400)
      for (const value of ['nope', randomUUID()]) {
        const res = await setOwner(v, id, { owner_id: value })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toContain('owner_id')
      }
      const u = await createUser(t)
      expect((await setOwner(v, randomUUID(), { owner_id: u.id })).statusCode).toBe(404)
      expect((await setOwner(randomUUID(), id, { owner_id: u.id })).statusCode).toBe(404)
      expect((await rowOf(id)).owner_id).toBeNull()
    })

    it('applies the ownership-change rules', async () => {
      const v = await newVault()
      const a = await createUser(t)
      const id = await uploaded(v, [file('x'), { name: 'owner_id', value: a.id }])
      // D on $[Owner=a] and C on the collection: may make it ownerless, not give it to itself.
      const releaser = await createUser(t, {
        policy: [P('RD', `Vault::${v}::Blob::$[Owner=${a.id}]`), P('C', `Vault::${v}::Blob::`)],
      })
      const give = await setOwner(v, id, { owner_id: releaser.id }, releaser.apiKey)
      expect(give.statusCode).toBe(401)
      const release = await setOwner(v, id, { owner_id: '' }, releaser.apiKey)
      expect(release.statusCode, release.body).toBe(200)
      expect(release.json().owner_id).toBeNull()
    })
  })

  describe('delete', () => {
    it('deletes the row, then the object', async () => {
      const v = await newVault()
      const owner = await createUser(t)
      const id = await uploaded(v, [
        file(bytes(100 * KiB), 'gone.bin', 'application/zip'),
        { name: 'owner_id', value: owner.id },
      ])
      const key = (await rowOf(id)).object_key
      expect(await h.objects()).toContain(key)
      const res = await t.api.delete(`/v1/vaults/${v}/blobs/${id}`, { auth })
      expect(res.statusCode).toBe(200)
      expect(res.json()).toMatchObject({
        result: 'success',
        blob_id: id,
        blob: {
          id,
          blob_id: id,
          filename: 'gone.bin',
          size: String(100 * KiB),
          mime_type: 'application/zip',
          owner_id: owner.id,
          vault_id: v,
        },
      })
      expect((await download(v, id)).statusCode).toBe(404)
      expect(await h.objects()).not.toContain(key)
      expect(await h.store.exists(key)).toBe(false)
      const again = await t.api.delete(`/v1/vaults/${v}/blobs/${id}`, { auth })
      expect(again.statusCode).toBe(404)
      const list = await t.api.get(`/v1/vaults/${v}/blobs`, { auth })
      expect(list.json().data.total).toBe(0)
    })

    it('needs D on the BLOB', async () => {
      const v = await newVault()
      const id = await uploaded(v, [file('x')])
      const reader = await createUser(t, { policy: [P('RU', `Vault::${v}::Blob::.*`)] })
      const denied = await t.api.delete(`/v1/vaults/${v}/blobs/${id}`, { auth: reader.apiKey })
      expect(denied.statusCode).toBe(401)
      const blind = await createUser(t, { policy: [P('D', `Vault::${v}::Blob::$[Owner=self]`)] })
      const hidden = await t.api.delete(`/v1/vaults/${v}/blobs/${id}`, { auth: blind.apiKey })
      expect(hidden.statusCode).toBe(404)
      expect((await download(v, id)).body).toBe('x')
      const deleter = await createUser(t, { policy: [P('D', `Vault::${v}::Blob::${id}`)] })
      const ok = await t.api.delete(`/v1/vaults/${v}/blobs/${id}`, { auth: deleter.apiKey })
      expect(ok.statusCode, ok.body).toBe(200)
    })
  })
})
