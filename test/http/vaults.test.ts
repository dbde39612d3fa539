import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import { type Admin, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

interface VaultBody {
  id: string
  name: string
  account_id?: string
}

let seq = 0
const uniqueName = (prefix = 'vault') => `${prefix}-${++seq}-${randomUUID().slice(0, 8)}`

function vaultOf(res: LightMyRequestResponse): VaultBody {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  expect(typeof body.transaction_id).toBe('string')
  return body.vault as VaultBody
}

function vaultsOf(res: LightMyRequestResponse): VaultBody[] {
  expect(res.statusCode, res.body).toBe(200)
  expect(res.json().result).toBe('success')
  return res.json().vaults as VaultBody[]
}

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp) {
  expect(res.statusCode, res.body).toBe(status)
  const error = errorOf(res)
  if (message) expect(error.message).toMatch(message)
  return error
}

describe('vault endpoints', () => {
  let t: TestApp
  let admin: string

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
  })
  afterAll(() => t.close())

  const create = async (name = uniqueName(), auth = admin) =>
    vaultOf(await t.api.post('/v1/vaults', { auth, form: { name } }))

  describe('POST /v1/vaults', () => {
    it('creates from an urlencoded form and answers {id, name}', async () => {
      const name = uniqueName()
      const vault = vaultOf(await t.api.post('/v1/vaults', { auth: admin, form: { name } }))
      expect(Object.keys(vault).sort()).toEqual(['id', 'name'])
      expect(vault.name).toBe(name)
      expect(vault.id).toMatch(/^[0-9a-f-]{36}$/)
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
    })

    it('creates from a multipart form (the official SDK)', async () => {
      const name = uniqueName()
      const vault = vaultOf(await t.api.post('/v1/vaults', { auth: admin, multipart: { name } }))
      expect(vault.name).toBe(name)
    })

    it('creates from the query string (the Ruby client)', async () => {
      const name = uniqueName('ruby vault')
      const vault = vaultOf(await t.api.post('/v1/vaults', { auth: admin, query: { name } }))
      expect(vault.name).toBe(name)
    })

    it('accepts a JSON body', async () => {
      const name = uniqueName()
      expect(vaultOf(await t.api.post('/v1/vaults', { auth: admin, json: { name } })).name).toBe(
        name,
      )
    })

    it('refuses a missing or empty name with 400', async () => {
      expectError(await t.api.post('/v1/vaults', { auth: admin, form: {} }), 400, /name/)
      expectError(await t.api.post('/v1/vaults', { auth: admin }), 400, /name/)
      expectError(await t.api.post('/v1/vaults', { auth: admin, form: { name: '' } }), 400, /name/)
      expectError(
        await t.api.post('/v1/vaults', { auth: admin, form: { name: '  ' } }),
        400,
        /name/,
      )
    })

    it('refuses a duplicate name with 400', async () => {
      const name = uniqueName()
      await create(name)
      const error = expectError(
        await t.api.post('/v1/vaults', { auth: admin, form: { name } }),
        400,
        /name/,
      )
      expect(error.type).toBe('invalid_request_error')
    })

    it('allows the same name in another account', async () => {
      const name = uniqueName()
      await create(name)
      const other = await t.newAccount()
      expect((await create(name, other.api_key)).name).toBe(name)
    })

    it('accepts 255 characters and refuses 256', async () => {
      const long = 'v'.repeat(255)
      expect((await create(long)).name).toBe(long)
      expectError(
        await t.api.post('/v1/vaults', { auth: admin, form: { name: 'w'.repeat(256) } }),
        400,
        /name/,
      )
    })
  })

  describe('GET /v1/vaults/{id}', () => {
    it('reads a vault', async () => {
      const vault = await create()
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
      // Ids are compared case-insensitively.
      expect(
        vaultOf(await t.api.get(`/v1/vaults/${vault.id.toUpperCase()}`, { auth: admin })),
      ).toEqual(vault)
    })

    it('answers 404 for an unknown vault', async () => {
      const error = expectError(await t.api.get(`/v1/vaults/${randomUUID()}`, { auth: admin }), 404)
      expect(error.type).toBe('not_found_error')
    })

    it('answers 400 for a malformed id', async () => {
      expectError(await t.api.get('/v1/vaults/not-a-uuid', { auth: admin }), 400, /vault_id/)
    })
  })

  describe('GET /v1/vaults', () => {
    it('lists vaults with the defaults page 1, per_page 100, in creation order', async () => {
      const fresh = await t.newAccount()
      const made: VaultBody[] = []
      for (let i = 0; i < 3; i++) made.push(await create(uniqueName(), fresh.api_key))
      expect(vaultsOf(await t.api.get('/v1/vaults', { auth: fresh.api_key }))).toEqual(made)
    })

    it('pages with page and per_page', async () => {
      const fresh = await t.newAccount()
      const made: VaultBody[] = []
      for (let i = 0; i < 5; i++) made.push(await create(uniqueName(), fresh.api_key))
      const page = (q: string) => t.api.get(`/v1/vaults?${q}`, { auth: fresh.api_key })
      expect(vaultsOf(await page('per_page=2'))).toEqual(made.slice(0, 2))
      expect(vaultsOf(await page('page=2&per_page=2'))).toEqual(made.slice(2, 4))
      expect(vaultsOf(await page('page=3&per_page=2'))).toEqual(made.slice(4))
      expect(vaultsOf(await page('page=4&per_page=2'))).toEqual([])
      expect(vaultsOf(await page('page=1'))).toEqual(made)
      expect(vaultsOf(await page('per_page=500'))).toEqual(made)
    })

    it('defaults per_page to 100', async () => {
      const fresh = await t.newAccount()
      const now = new Date().toISOString()
      const ids = Array.from({ length: 101 }, () => randomUUID())
      // Fast: insert the rows directly (ids in order, as UUIDv7s would be).
      ids.sort()
      await t.deps.store.db
        .insertInto('vaults')
        .values(
          ids.map((id, i) => ({
            account_id: fresh.account_id,
            id,
            name: `bulk-${i}`,
            created_at: now,
            updated_at: now,
          })),
        )
        .execute()
      const first = vaultsOf(await t.api.get('/v1/vaults', { auth: fresh.api_key }))
      expect(first.map((v) => v.id)).toEqual(ids.slice(0, 100))
      const second = vaultsOf(await t.api.get('/v1/vaults?page=2', { auth: fresh.api_key }))
      expect(second.map((v) => v.id)).toEqual(ids.slice(100))
    })

    it('refuses per_page 0 or 501 and page 0 with 400', async () => {
      for (const q of ['per_page=0', 'per_page=501', 'page=0', 'page=x', 'per_page=-1']) {
        expectError(await t.api.get(`/v1/vaults?${q}`, { auth: admin }), 400)
      }
    })

    it('lists only the vaults the caller may read', async () => {
      const a = await create()
      await create()
      const reader = await createUser(t, {
        policy: [{ Resources: [`Vault::${a.id}`], Activities: 'R' }],
      })
      expect(vaultsOf(await t.api.get('/v1/vaults', { auth: reader.apiKey }))).toEqual([a])
    })

    it('answers 401 to a caller with no read on any vault', async () => {
      const user = await createUser(t, {
        policy: [{ Resources: ['Vault::'], Activities: 'C' }],
      })
      expectError(await t.api.get('/v1/vaults', { auth: user.apiKey }), 401)
    })

    it('never lists another account’s vaults', async () => {
      const other = await t.newAccount()
      const theirs = await create(uniqueName(), other.api_key)
      const mine = vaultsOf(await t.api.get('/v1/vaults?per_page=500', { auth: admin }))
      expect(mine.map((v) => v.id)).not.toContain(theirs.id)
    })
  })

  describe('GET /v1/accounts/{account_id}/vaults (legacy)', () => {
    it('lists the vaults with their account_id', async () => {
      const fresh = await t.newAccount()
      const made = [
        await create(uniqueName(), fresh.api_key),
        await create(uniqueName(), fresh.api_key),
      ]
      const listed = vaultsOf(
        await t.api.get(`/v1/accounts/${fresh.account_id}/vaults`, { auth: fresh.api_key }),
      )
      expect(listed).toEqual(made.map((v) => ({ ...v, account_id: fresh.account_id })))
      // Paging works here too.
      const paged = vaultsOf(
        await t.api.get(`/v1/accounts/${fresh.account_id}/vaults?page=2&per_page=1`, {
          auth: fresh.api_key,
        }),
      )
      expect(paged.map((v) => v.id)).toEqual([made[1]?.id])
    })

    it('answers 404 for another account’s id and 400 for a malformed one', async () => {
      const other = await t.newAccount()
      expectError(await t.api.get(`/v1/accounts/${other.account_id}/vaults`, { auth: admin }), 404)
      expectError(await t.api.get(`/v1/accounts/${randomUUID()}/vaults`, { auth: admin }), 404)
      expectError(await t.api.get('/v1/accounts/nope/vaults', { auth: admin }), 400)
    })

    it('shows only readable vaults', async () => {
      const a = await create()
      await create()
      const reader = await createUser(t, {
        policy: [{ Resources: [`Vault::${a.id}`], Activities: 'R' }],
      })
      const listed = vaultsOf(
        await t.api.get(`/v1/accounts/${t.admin.account_id}/vaults`, { auth: reader.apiKey }),
      )
      expect(listed).toEqual([{ ...a, account_id: t.admin.account_id }])
    })
  })

  describe('PUT /v1/vaults/{id}', () => {
    it('renames (form, multipart, query string)', async () => {
      const vault = await create()
      const first = uniqueName('renamed')
      expect(
        vaultOf(await t.api.put(`/v1/vaults/${vault.id}`, { auth: admin, form: { name: first } })),
      ).toEqual({ id: vault.id, name: first })
      const second = uniqueName('renamed')
      expect(
        vaultOf(
          await t.api.put(`/v1/vaults/${vault.id}`, { auth: admin, multipart: { name: second } }),
        ).name,
      ).toBe(second)
      const third = uniqueName('renamed')
      expect(
        vaultOf(await t.api.put(`/v1/vaults/${vault.id}`, { auth: admin, query: { name: third } }))
          .name,
      ).toBe(third)
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin })).name).toBe(third)
    })

    it('returns the vault unchanged without a name', async () => {
      const vault = await create()
      expect(vaultOf(await t.api.put(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
      expect(vaultOf(await t.api.put(`/v1/vaults/${vault.id}`, { auth: admin, form: {} }))).toEqual(
        vault,
      )
    })

    it('keeps its own name (renaming to the same name is no conflict)', async () => {
      const vault = await create()
      expect(
        vaultOf(
          await t.api.put(`/v1/vaults/${vault.id}`, { auth: admin, form: { name: vault.name } }),
        ),
      ).toEqual(vault)
    })

    it('refuses a duplicate, empty or over-long name with 400 and keeps the old name', async () => {
      const taken = await create()
      const vault = await create()
      for (const name of [taken.name, '', 'x'.repeat(256)]) {
        expectError(
          await t.api.put(`/v1/vaults/${vault.id}`, { auth: admin, form: { name } }),
          400,
          /name/,
        )
      }
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
    })

    it('answers 404 for an unknown vault, with or without a name', async () => {
      const id = randomUUID()
      expectError(await t.api.put(`/v1/vaults/${id}`, { auth: admin, form: { name: 'x' } }), 404)
      expectError(await t.api.put(`/v1/vaults/${id}`, { auth: admin }), 404)
      expectError(await t.api.put('/v1/vaults/bad', { auth: admin, form: { name: 'x' } }), 400)
    })
  })

  describe('DELETE /v1/vaults/{id}', () => {
    it('deletes an empty vault and answers {id, name}; then 404', async () => {
      const vault = await create()
      expect(vaultOf(await t.api.delete(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
      expectError(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }), 404)
      expectError(await t.api.delete(`/v1/vaults/${vault.id}`, { auth: admin }), 404)
      // The name is free again.
      expect((await create(vault.name)).name).toBe(vault.name)
    })

    it('refuses a vault that holds a document with 400 VAULT_NOT_EMPTY; it still exists', async () => {
      const vault = await create()
      const doc = await t.api.post(`/v2/vaults/${vault.id}/documents`, {
        auth: admin,
        json: { document: { a: 1 } },
      })
      expect(doc.statusCode, doc.body).toBe(200)
      const error = expectError(await t.api.delete(`/v1/vaults/${vault.id}`, { auth: admin }), 400)
      expect(error.code).toBe('VAULT_NOT_EMPTY')
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
      // Once emptied it can go.
      const docId = doc.json().document_id
      const del = await t.api.delete(`/v1/vaults/${vault.id}/documents/${docId}`, { auth: admin })
      expect(del.statusCode, del.body).toBe(200)
      expect(vaultOf(await t.api.delete(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
    })

    it('refuses a vault that holds only a schema with 400 VAULT_NOT_EMPTY', async () => {
      const vault = await create()
      const now = new Date().toISOString()
      await t.deps.store.db
        .insertInto('schemas')
        .values({
          account_id: t.admin.account_id,
          vault_id: vault.id,
          id: randomUUID(),
          name: 'only-schema',
          fields: '[]',
          created_at: now,
          updated_at: now,
        })
        .execute()
      const error = expectError(await t.api.delete(`/v1/vaults/${vault.id}`, { auth: admin }), 400)
      expect(error.code).toBe('VAULT_NOT_EMPTY')
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
    })

    it('answers 404 for an unknown vault and 400 for a malformed id', async () => {
      expectError(await t.api.delete(`/v1/vaults/${randomUUID()}`, { auth: admin }), 404)
      expectError(await t.api.delete('/v1/vaults/123', { auth: admin }), 400)
    })
  })

  describe('permissions', () => {
    let vault: VaultBody
    let other: VaultBody
    const on = (activities: string, res: string): PolicyStatement[] => [
      { Resources: [res], Activities: activities },
    ]

    beforeAll(async () => {
      vault = await create()
      other = await create()
    })

    it('answers 401 without a credential or with an unknown one', async () => {
      const calls = [
        () => t.api.post('/v1/vaults', { form: { name: uniqueName() } }),
        () => t.api.get('/v1/vaults'),
        () => t.api.get(`/v1/vaults/${vault.id}`),
        () => t.api.put(`/v1/vaults/${vault.id}`, { form: { name: uniqueName() } }),
        () => t.api.delete(`/v1/vaults/${vault.id}`),
        () => t.api.get(`/v1/accounts/${t.admin.account_id}/vaults`),
        () => t.api.get(`/v1/vaults/${vault.id}`, { auth: 'not-a-real-key' }),
      ]
      for (const call of calls) {
        const error = expectError(await call(), 401)
        expect(error.type).toBe('authentication_error')
      }
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
    })

    it('create needs C on Vault::', async () => {
      const creator = await createUser(t, { policy: on('C', 'Vault::') })
      const reader = await createUser(t, { policy: on('R', 'Vault::.*') })
      expect((await create(uniqueName(), creator.apiKey)).id).toBeTruthy()
      const error = expectError(
        await t.api.post('/v1/vaults', { auth: reader.apiKey, form: { name: uniqueName() } }),
        401,
      )
      expect(error.type).toBe('authorization_error')
      expect(error.code).toBe('PERMISSION_DENIED')
    })

    it('read needs R on Vault::V (denied before lookup: unknown ids also 401)', async () => {
      const user = await createUser(t, { policy: on('R', `Vault::${vault.id}`) })
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: user.apiKey }))).toEqual(
        vault,
      )
      expectError(await t.api.get(`/v1/vaults/${other.id}`, { auth: user.apiKey }), 401)
      expectError(await t.api.get(`/v1/vaults/${randomUUID()}`, { auth: user.apiKey }), 401)
      // R does not give U or D.
      expectError(
        await t.api.put(`/v1/vaults/${vault.id}`, {
          auth: user.apiKey,
          form: { name: uniqueName() },
        }),
        401,
      )
      expectError(await t.api.delete(`/v1/vaults/${vault.id}`, { auth: user.apiKey }), 401)
      expectError(
        await t.api.post('/v1/vaults', { auth: user.apiKey, form: { name: uniqueName() } }),
        401,
      )
    })

    it('rename needs U on Vault::V', async () => {
      const user = await createUser(t, { policy: on('U', `Vault::${vault.id}`) })
      const name = uniqueName('by-updater')
      expect(
        vaultOf(await t.api.put(`/v1/vaults/${vault.id}`, { auth: user.apiKey, form: { name } }))
          .name,
      ).toBe(name)
      vault.name = name
      expectError(
        await t.api.put(`/v1/vaults/${other.id}`, {
          auth: user.apiKey,
          form: { name: uniqueName() },
        }),
        401,
      )
      expectError(await t.api.get(`/v1/vaults/${vault.id}`, { auth: user.apiKey }), 401)
    })

    it('delete needs D on Vault::V', async () => {
      const target = await create()
      const user = await createUser(t, { policy: on('D', `Vault::${target.id}`) })
      expectError(await t.api.delete(`/v1/vaults/${other.id}`, { auth: user.apiKey }), 401)
      expect(vaultOf(await t.api.delete(`/v1/vaults/${target.id}`, { auth: user.apiKey }))).toEqual(
        target,
      )
      expectError(await t.api.delete(`/v1/vaults/${target.id}`, { auth: user.apiKey }), 404)
    })

    it('a user in no group gets 401 everywhere', async () => {
      const nobody = await createUser(t)
      expectError(await t.api.get('/v1/vaults', { auth: nobody.apiKey }), 401)
      expectError(await t.api.get(`/v1/vaults/${vault.id}`, { auth: nobody.apiKey }), 401)
      expectError(
        await t.api.post('/v1/vaults', { auth: nobody.apiKey, form: { name: uniqueName() } }),
        401,
      )
    })
  })

  describe('cross-account', () => {
    let b: Admin
    beforeAll(async () => {
      b = await t.newAccount()
    })

    it('another account’s admin gets 404 for the vault on every route', async () => {
      const vault = await create()
      expectError(await t.api.get(`/v1/vaults/${vault.id}`, { auth: b.api_key }), 404)
      expectError(
        await t.api.put(`/v1/vaults/${vault.id}`, { auth: b.api_key, form: { name: 'x' } }),
        404,
      )
      expectError(await t.api.put(`/v1/vaults/${vault.id}`, { auth: b.api_key }), 404)
      expectError(await t.api.delete(`/v1/vaults/${vault.id}`, { auth: b.api_key }), 404)
      expect(vaultOf(await t.api.get(`/v1/vaults/${vault.id}`, { auth: admin }))).toEqual(vault)
    })
  })
})
