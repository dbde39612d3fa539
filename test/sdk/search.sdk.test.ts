import type TrueVaultClient from 'truevault'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectApiError, sdkError, sdkFor, TRANSPORTS, UUID, uniqueName } from './support.js'

/** The SDK suite's user schema check: fields array, id uuid, name, vault_id uuid. */
function expectUserSchemaShape(schema: TrueVaultClient.UserSchema): void {
  expect(Array.isArray(schema.fields)).toBe(true)
  expect(schema.id).toMatch(UUID)
  expect(typeof schema.name).toBe('string')
  expect(schema.vault_id).toMatch(UUID)
}

/** The SDK suite's schema check: id, vault_id, name and fields, all required. */
function expectSchemaShape(schema: TrueVaultClient.Schema): void {
  expect(schema.id).toMatch(UUID)
  expect(schema.vault_id).toMatch(UUID)
  expect(typeof schema.name).toBe('string')
  expect(Array.isArray(schema.fields)).toBe(true)
}

/** The SDK suite's search check: a documents array and four integer info fields. */
function expectSearchShape<T>(result: TrueVaultClient.SearchResult<T>): void {
  expect(Array.isArray(result.documents)).toBe(true)
  const { current_page, num_pages, per_page, total_result_count } = result.info
  for (const n of [current_page, num_pages, per_page, total_result_count])
    expect(Number.isInteger(n)).toBe(true)
}

/**
 * Mirrors the user schema and user search steps of the official SDK suite's "users → works".
 * Unlike the suite (which tolerates empty results for indexing latency), results must be exact.
 */
describe.each(TRANSPORTS)('official SDK (%s): user schema and user search', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  let server: TestServer
  let admin: TrueVaultClient
  let accountId: string
  let user: TrueVaultClient.User
  const foo = uniqueName()

  beforeAll(async () => {
    server = await startTestServer()
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
    accountId = server.admin.account_id
  })
  afterAll(() => server?.close())

  it('createUserSchema: the account already has one (the suite ignores the outcome)', async () => {
    const error = await sdkError(admin.createUserSchema(accountId, uniqueName(), []))
    expectApiError(error)
    expect(error.error.code).toBe('USER_SCHEMA_EXISTS')
  })

  it('updateUserSchema and readUserSchema answer {fields, id, name, vault_id}', async () => {
    const before = await admin.readUserSchema(accountId)
    expectUserSchemaShape(before)
    const name = uniqueName()
    const updated = await admin.updateUserSchema(accountId, name, [
      { name: 'foo', type: 'string', index: 1 },
    ])
    expectUserSchemaShape(updated)
    expect(updated).toEqual({
      id: before.id,
      name,
      fields: [{ name: 'foo', type: 'string', index: true }],
      vault_id: before.vault_id,
    })
    const read = await admin.readUserSchema(accountId)
    expectUserSchemaShape(read)
    expect(read).toEqual(updated)
  })

  it('deleteUserSchema throws: the account has users', async () => {
    expectApiError(await sdkError(admin.deleteUserSchema(accountId)))
    expect((await admin.readUserSchema(accountId)).fields).toHaveLength(1)
  })

  it('createUser and updateUserAttributes({foo})', async () => {
    // The form-data package cannot append `undefined`: with it, createUser needs a password.
    user = await admin.createUser(uniqueName(), uniqueName())
    expect(user.id).toMatch(UUID)
    const updated = await admin.updateUserAttributes(user.id, { foo })
    expect(updated.id).toBe(user.id)
  })

  it('searchUsers(foo eq …) answers {documents: [{id}], info}', async () => {
    const result = await admin.searchUsers({ filter: { foo: { type: 'eq', value: foo } } })
    expectSearchShape(result)
    expect(result.documents).toHaveLength(1)
    for (const d of result.documents) {
      expect(d.id).toMatch(UUID)
      expect(d).not.toHaveProperty('attributes')
      // The spec's shape beside the SDK's (decisions.md, user search hits); no document either.
      expect(d).toMatchObject({ document_id: d.id, owner_id: null })
      expect(d).not.toHaveProperty('document')
    }
    expect(result.documents[0]?.id).toBe(user.id)
    expect(result.info).toEqual({
      current_page: 1,
      num_pages: 1,
      per_page: 100,
      total_result_count: 1,
    })
    const none = await admin.searchUsers({ filter: { foo: { type: 'eq', value: uniqueName() } } })
    expectSearchShape(none)
    expect(none).toEqual({
      documents: [],
      info: { current_page: 1, num_pages: 0, per_page: 100, total_result_count: 0 },
    })
  })

  it('searchUsers with full_document: attributes decoded to an object', async () => {
    const result = await admin.searchUsers({
      filter: { foo: { type: 'eq', value: foo } },
      full_document: true,
    })
    expectSearchShape(result)
    expect(result.documents).toHaveLength(1)
    for (const d of result.documents) {
      expect(d.id).toMatch(UUID)
      expect(typeof d.attributes).toBe('object')
    }
    expect(result.documents[0]?.attributes).toEqual({ foo })
    // The SDK decodes only `attributes`; the spec's `document` stays base64 of the same JSON.
    const doc = result.documents[0]?.document as string
    expect(JSON.parse(Buffer.from(doc, 'base64').toString('utf8'))).toEqual({ foo })
  })

  it('updateCurrentUser(null) takes the admin out of user search', async () => {
    const byName = { filter: { '$sys.username': { type: 'eq', value: server.admin.username } } }
    expect((await admin.searchUsers(byName)).documents).toHaveLength(1)
    await admin.updateCurrentUser(null)
    expect((await admin.readCurrentUser()).attributes).toBeNull()
    expect((await admin.searchUsers(byName)).documents).toEqual([])
  })

  it('an invalid search is an API error naming the field', async () => {
    const error = await sdkError(admin.searchUsers({ filter: { bar: { type: 'eq', value: 1 } } }))
    expectApiError(error)
    expect(error.message).toMatch(/bar/)
  })
})

/** Mirrors the schema and search steps of the official SDK suite's "vaults and docs → works". */
describe.each(TRANSPORTS)('official SDK (%s): schemas and vault search', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  let server: TestServer
  let admin: TrueVaultClient
  let vault: TrueVaultClient.Vault
  let doc: TrueVaultClient.DocumentMeta
  let inSchema: TrueVaultClient.DocumentMeta
  let schema: TrueVaultClient.Schema

  beforeAll(async () => {
    server = await startTestServer()
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
    vault = await admin.createVault(uniqueName())
    doc = await admin.createDocument(vault.id, null, { foo: 'bar' })
  })
  afterAll(() => server?.close())

  it('createSchema answers {id, vault_id, name, fields}', async () => {
    const name = uniqueName()
    schema = await admin.createSchema(vault.id, name, [
      { name: 'foo', type: 'string', index: true },
    ])
    expectSchemaShape(schema)
    expect(schema).toEqual({
      id: expect.stringMatching(UUID),
      vault_id: vault.id,
      name,
      fields: [{ name: 'foo', type: 'string', index: true }],
    })
    // The same name again is refused.
    expectApiError(await sdkError(admin.createSchema(vault.id, name, [])))
  })

  it('updateDocument attaches an existing document to the schema', async () => {
    const updated = await admin.updateDocument(
      vault.id,
      doc.id,
      { foo: 'bar' },
      undefined,
      schema.id,
    )
    expect(updated).toMatchObject({ id: doc.id, vault_id: vault.id, owner_id: null })
    const listed = await admin.listDocumentsInSchema(vault.id, schema.id)
    expect(listed.items.map((i) => i.id)).toEqual([doc.id])
  })

  it('readSchema and listSchemas', async () => {
    const read = await admin.readSchema(vault.id, schema.id)
    expectSchemaShape(read)
    expect(read).toEqual(schema)
    const other = await admin.createSchema(vault.id, uniqueName(), [])
    const schemas = await admin.listSchemas(vault.id)
    for (const s of schemas) expectSchemaShape(s)
    expect(schemas).toEqual([schema, other])
    expectApiError(
      await sdkError(admin.readSchema(vault.id, '00000000-0000-4000-8000-000000000000')),
    )
    await admin.deleteSchema(vault.id, other.id)
  })

  it('create and deleteSchema of a second, empty schema (answers nothing)', async () => {
    const second = await admin.createSchema(vault.id, uniqueName(), [])
    expectSchemaShape(second)
    expect(await admin.deleteSchema(vault.id, second.id)).toBeUndefined()
    expectApiError(await sdkError(admin.readSchema(vault.id, second.id)))
    expect((await admin.listSchemas(vault.id)).map((s) => s.id)).toEqual([schema.id])
  })

  it('deleteSchema of a schema with documents throws', async () => {
    const error = await sdkError(admin.deleteSchema(vault.id, schema.id))
    expectApiError(error)
    expect(error.error.code).toBe('SCHEMA_IN_USE')
  })

  it('a document created with schema_id appears in listDocumentsInSchema(full)', async () => {
    inSchema = await admin.createDocument(vault.id, schema.id, { foo: 'bar', n: 1 })
    const listed = await admin.listDocumentsInSchema(vault.id, schema.id, true)
    expect(listed).toMatchObject({ page: 1, per_page: 100, total: 2 })
    expect(listed.items).toEqual([
      expect.objectContaining({ id: doc.id, document: { foo: 'bar' } }),
      expect.objectContaining({ id: inSchema.id, document: { foo: 'bar', n: 1 } }),
    ])
    const page2 = await admin.listDocumentsInSchema(vault.id, schema.id, false, 2, 1)
    expect(page2).toMatchObject({ page: 2, per_page: 1, total: 2 })
    expect(page2.items.map((i) => i.id)).toEqual([inSchema.id])
    expect(page2.items[0]).not.toHaveProperty('document')
  })

  it('searchDocuments(schema_id, foo eq bar) answers {documents, info}', async () => {
    const option = { schema_id: schema.id, filter: { foo: { type: 'eq', value: 'bar' } } }
    const result = await admin.searchDocuments(vault.id, option)
    expectSearchShape(result)
    expect(result.documents).toEqual([
      { document_id: doc.id, owner_id: null },
      { document_id: inSchema.id, owner_id: null },
    ])
    expect(result.info).toEqual({
      current_page: 1,
      num_pages: 1,
      per_page: 100,
      total_result_count: 2,
    })
    const miss = await admin.searchDocuments(vault.id, {
      ...option,
      filter: { foo: { type: 'eq', value: 'baz' } },
    })
    expect(miss.documents).toEqual([])
  })

  it('searchDocuments with full_document: document_id, owner_id and a decoded document', async () => {
    const result = await admin.searchDocuments(vault.id, {
      schema_id: schema.id,
      filter: { foo: { type: 'eq', value: 'bar' } },
      full_document: true,
    })
    expectSearchShape(result)
    expect(result.documents).toHaveLength(2)
    for (const d of result.documents) {
      expect(d.document_id).toMatch(UUID)
      expect('owner_id' in d).toBe(true)
      if (d.owner_id !== null) expect(d.owner_id).toMatch(UUID)
      expect(typeof d.document).toBe('object')
    }
    expect(result.documents.map((d) => d.document)).toEqual([{ foo: 'bar' }, { foo: 'bar', n: 1 }])
  })

  it('updateSchema(newName, []) answers exactly that; foo is no longer searchable', async () => {
    const name = uniqueName()
    const updated = await admin.updateSchema(vault.id, schema.id, name, [])
    expectSchemaShape(updated)
    expect(updated).toEqual({ id: schema.id, vault_id: vault.id, name, fields: [] })
    expect(await admin.readSchema(vault.id, schema.id)).toEqual(updated)
    expect((await admin.listDocumentsInSchema(vault.id, schema.id)).total).toBe(2)
    const error = await sdkError(
      admin.searchDocuments(vault.id, {
        schema_id: schema.id,
        filter: { foo: { type: 'eq', value: 'bar' } },
      }),
    )
    expectApiError(error)
    expect(error.message).toMatch(/foo/)
    // Indexing foo again finds both documents, made before the change.
    await admin.updateSchema(vault.id, schema.id, name, [{ name: 'foo', type: 'string', index: 1 }])
    const again = await admin.searchDocuments(vault.id, {
      schema_id: schema.id,
      filter: { foo: { type: 'eq', value: 'bar' } },
    })
    expect(again.documents.map((d) => d.document_id)).toEqual([doc.id, inSchema.id])
  })

  it('deleteDocument yields {id}; the result set shrinks', async () => {
    const deleted = await admin.deleteDocument(vault.id, doc.id)
    expect(deleted.id).toBe(doc.id)
    const result = await admin.searchDocuments(vault.id, {
      schema_id: schema.id,
      filter: { foo: { type: 'eq', value: 'bar' } },
    })
    expect(result.documents.map((d) => d.document_id)).toEqual([inSchema.id])
    expect(result.info.total_result_count).toBe(1)
  })
})
