import type TrueVaultClient from 'truevault'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectApiError, sdkError, sdkFor, TRANSPORTS, UUID, uniqueName } from './support.js'

const MISSING = '00000000-0000-4000-8000-000000000000'

/** The SDK suite's vault check: `id` and `name` required. */
function expectVaultShape(vault: TrueVaultClient.Vault): void {
  expect(vault.id).toMatch(UUID)
  expect(typeof vault.name).toBe('string')
}

/** The SDK suite's document schema: `id`, `vault_id` uuid and `owner_id` uuid or null, required. */
function expectDocumentShape(doc: TrueVaultClient.DocumentMeta): void {
  expect(doc.id).toMatch(UUID)
  expect(doc.vault_id).toMatch(UUID)
  expect('owner_id' in doc).toBe(true)
  if (doc.owner_id !== null) expect(doc.owner_id).toMatch(UUID)
}

/** The SDK suite's document list schema: integer page fields, items with `id` and an object. */
function expectDocumentPage(
  list: TrueVaultClient.Page<TrueVaultClient.DocumentItem>,
  full: boolean,
): void {
  for (const n of [list.page, list.per_page, list.total]) expect(Number.isInteger(n)).toBe(true)
  expect(Array.isArray(list.items)).toBe(true)
  for (const item of list.items) {
    expect(item.id).toMatch(UUID)
    if (full) expect(typeof item.document).toBe('object')
    else expect(item).not.toHaveProperty('document')
  }
}

/**
 * Mirrors the official SDK suite's "vaults and docs → works" (its schema and search steps wait for
 * those endpoints), one step per case.
 */
describe.each(TRANSPORTS)('official SDK (%s): vaults and documents', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  let server: TestServer
  let admin: TrueVaultClient

  let vault: TrueVaultClient.Vault
  let doc: TrueVaultClient.DocumentMeta
  let owner: TrueVaultClient.User

  beforeAll(async () => {
    server = await startTestServer()
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
    // The form-data package cannot append `undefined`: with it, createUser needs a password.
    owner = await admin.createUser(uniqueName(), uniqueName())
  })
  afterAll(() => server?.close())

  it('listVaults: an array, every item with id and name', async () => {
    expect(await admin.listVaults()).toEqual([])
    const a = await admin.createVault(uniqueName())
    const b = await admin.createVault(uniqueName())
    const vaults = await admin.listVaults()
    for (const v of vaults) expectVaultShape(v)
    expect(vaults.map((v) => v.id).sort()).toEqual([a.id, b.id].sort())
    expect(await admin.listVaults(2, 1)).toHaveLength(1)
  })

  it('createVault answers {id, name}; a name in use is refused', async () => {
    const name = uniqueName()
    vault = await admin.createVault(name)
    expectVaultShape(vault)
    expect(vault.name).toBe(name)
    expectApiError(await sdkError(admin.createVault(name)))
  })

  it('readVault', async () => {
    expect(await admin.readVault(vault.id)).toMatchObject({ id: vault.id, name: vault.name })
    expectApiError(await sdkError(admin.readVault(MISSING)))
  })

  it('updateVault answers the new name', async () => {
    const name = uniqueName()
    const updated = await admin.updateVault(vault.id, name)
    expectVaultShape(updated)
    expect(updated).toMatchObject({ id: vault.id, name })
    expect(await admin.readVault(vault.id)).toMatchObject({ name })
    vault = updated
  })

  it('createDocument (v2) answers {id, vault_id, owner_id: null}', async () => {
    doc = await admin.createDocument(vault.id, null, { foo: 'bar' })
    expectDocumentShape(doc)
    expect(doc).toMatchObject({ vault_id: vault.id, owner_id: null })
  })

  it('updateDocumentOwner answers the document with its new owner; "" removes it', async () => {
    const owned = await admin.updateDocumentOwner(vault.id, doc.id, owner.id)
    expectDocumentShape(owned)
    expect(owned).toMatchObject({ id: doc.id, vault_id: vault.id, owner_id: owner.id })

    const unowned = await admin.updateDocumentOwner(vault.id, doc.id, '')
    expect(unowned).toMatchObject({ id: doc.id, owner_id: null })
    doc = await admin.updateDocumentOwner(vault.id, doc.id, owner.id)
  })

  it('getDocuments (v2) of one id answers [{id, document object}]', async () => {
    const docs = await admin.getDocuments(vault.id, [doc.id])
    expect(docs).toHaveLength(1)
    expect(docs[0]).toMatchObject({ id: doc.id, document: { foo: 'bar' } })
    expect(await admin.getDocuments(vault.id, [])).toEqual([])
    expectApiError(await sdkError(admin.getDocuments(vault.id, [MISSING])))
  })

  it('listDocuments: full lists decode to objects; paging', async () => {
    const second = await admin.createDocument(vault.id, null, { n: 2 })

    const full = await admin.listDocuments(vault.id, true)
    expectDocumentPage(full, true)
    expect(full).toMatchObject({ page: 1, per_page: 100, total: 2 })
    expect(full.items).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: doc.id, document: { foo: 'bar' } }),
        expect.objectContaining({ id: second.id, document: { n: 2 } }),
      ]),
    )

    const ids = await admin.listDocuments(vault.id, false)
    expectDocumentPage(ids, false)
    expect(ids.items.map((i) => i.id).sort()).toEqual([doc.id, second.id].sort())

    const page2 = await admin.listDocuments(vault.id, true, 2, 1)
    expectDocumentPage(page2, true)
    expect(page2).toMatchObject({ page: 2, per_page: 1, total: 2 })
    expect(page2.items).toHaveLength(1)

    const both = await admin.getDocuments(vault.id, [doc.id, second.id])
    expect(both.map((d) => d.id).sort()).toEqual([doc.id, second.id].sort())
    await admin.deleteDocument(vault.id, second.id)
  })

  it('updateDocument (v2) answers the document shape; the content changes', async () => {
    const updated = await admin.updateDocument(vault.id, doc.id, { foo: 'baz', n: [1, 2] })
    expectDocumentShape(updated)
    expect(updated).toMatchObject({ id: doc.id, vault_id: vault.id, owner_id: owner.id })
    expect(await admin.getDocuments(vault.id, [doc.id])).toMatchObject([
      { id: doc.id, document: { foo: 'baz', n: [1, 2] } },
    ])
  })

  it('updateDocument with an owner', async () => {
    const other = await admin.createUser(uniqueName(), uniqueName())
    const updated = await admin.updateDocument(vault.id, doc.id, { foo: 'bar' }, other.id)
    expect(updated).toMatchObject({ id: doc.id, owner_id: other.id })
    doc = await admin.updateDocumentOwner(vault.id, doc.id, owner.id)
  })

  it('createDocument with an owner reports that owner_id', async () => {
    const owned = await admin.createDocument(vault.id, null, { owned: true }, owner.id)
    expectDocumentShape(owned)
    expect(owned).toMatchObject({ vault_id: vault.id, owner_id: owner.id })
    expect(await admin.getDocuments(vault.id, [owned.id])).toMatchObject([
      { id: owned.id, document: { owned: true } },
    ])
    await admin.deleteDocument(vault.id, owned.id)
  })

  it('deleteDocument yields {id}; the document is gone', async () => {
    const deleted = await admin.deleteDocument(vault.id, doc.id)
    expect(deleted.id).toBe(doc.id)
    expect(deleted.owner_id).toBe(owner.id)
    expectApiError(await sdkError(admin.getDocuments(vault.id, [doc.id])))
    expectApiError(await sdkError(admin.deleteDocument(vault.id, doc.id)))
    expect(await admin.listDocuments(vault.id, true)).toMatchObject({ total: 0, items: [] })
  })

  it('deleteVault answers {id, name}; the vault is gone', async () => {
    const name = uniqueName()
    const throwaway = await admin.createVault(name)
    const deleted = await admin.deleteVault(throwaway.id)
    expectVaultShape(deleted)
    expect(deleted).toMatchObject({ id: throwaway.id, name })
    expectApiError(await sdkError(admin.readVault(throwaway.id)))
    expectApiError(await sdkError(admin.deleteVault(throwaway.id)))
  })
})
