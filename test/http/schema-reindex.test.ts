import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { REINDEX_BATCH } from '../../src/modules/schemas/schemas.service.js'
import { b64, buildTestApp, type TestApp } from '../helpers/app.js'
import {
  insertDocument,
  insertSchema,
  optionForm,
  searchData,
  type TestSchema,
} from '../helpers/search-fixtures.js'

/**
 * A change of a schema's indexed fields on a vault with documents (issue 14, point 5): beyond
 * one batch the documents are re-indexed in batches after the change commits, with the progress
 * at GET …/schemas/{id}/reindex, and the index ends consistent with documents created, updated
 * and deleted while the batches ran.
 */
const BEFORE: SchemaField[] = [{ name: 'name', type: 'string', index: true }]
const AFTER: SchemaField[] = [...BEFORE, { name: 'age', type: 'integer', index: true }]
const N = 3 * REINDEX_BATCH + 17

describe('batched schema re-index', () => {
  let t: TestApp
  let admin: string

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
  })
  afterAll(async () => {
    await t?.deps.schemas.reindexIdle()
    await t?.close()
  })

  async function vaultWith(
    n: number,
  ): Promise<{ vault: string; schema: TestSchema; ids: string[] }> {
    const v = await t.api.post('/v1/vaults', { auth: admin, form: { name: `v-${randomUUID()}` } })
    const vault = v.json().vault.id as string
    const schema = await insertSchema(t, t.admin.account_id, vault, BEFORE)
    const ids: string[] = []
    for (let i = 0; i < n; i++) {
      ids.push(
        await insertDocument(t, {
          accountId: t.admin.account_id,
          vaultId: vault,
          schema,
          content: { name: `n${i}`, age: i },
        }),
      )
    }
    return { vault, schema, ids }
  }

  const changeFields = (vault: string, schema: TestSchema, fields: SchemaField[]) =>
    t.api.put(`/v1/vaults/${vault}/schemas/${schema.id}`, {
      auth: admin,
      form: { schema: b64({ name: 'people', fields }) },
    })
  const progress = async (vault: string, schema: TestSchema) => {
    const res = await t.api.get(`/v1/vaults/${vault}/schemas/${schema.id}/reindex`, {
      auth: admin,
    })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().reindex as { state: string; documents_done: number; documents_total: number }
  }
  const matches = async (vault: string, schema: TestSchema, filter: Record<string, unknown>) => {
    const ids: string[] = []
    for (let page = 1; ; page++) {
      const res = await t.api.post(`/v1/vaults/${vault}/search`, {
        auth: admin,
        form: optionForm({ schema_id: schema.id, filter, page, per_page: 100 }),
      })
      const data = searchData<{ document_id: string }>(res)
      ids.push(...data.documents.map((d) => d.document_id))
      if (data.documents.length < 100) return { ids, total: data.info.total_result_count }
      // The result window (500) is past the test's needs only for totals: stop at it.
      if (page * 100 >= 500) return { ids, total: data.info.total_result_count }
    }
  }

  it('re-indexes documents that fit in one batch in the change itself', async () => {
    const { vault, schema } = await vaultWith(5)
    expect(await progress(vault, schema)).toEqual({
      state: 'none',
      documents_done: 0,
      documents_total: 0,
    })
    expect((await changeFields(vault, schema, AFTER)).statusCode).toBe(200)
    expect(await progress(vault, schema)).toEqual({
      state: 'done',
      documents_done: 5,
      documents_total: 5,
    })
    expect(
      (await matches(vault, schema, { age: { type: 'range', value: { gte: 0 } } })).total,
    ).toBe(5)
  })

  it('re-indexes more in batches after the change, consistent with writes made meanwhile', async () => {
    const { vault, schema, ids } = await vaultWith(N)
    // Held: the change's answer comes before any batch ran (nothing re-indexed in its request).
    await t.deps.schemas.stopReindexes()
    expect((await changeFields(vault, schema, AFTER)).statusCode).toBe(200)
    expect(await progress(vault, schema)).toEqual({
      state: 'running',
      documents_done: 0,
      documents_total: N,
    })
    // Nothing re-indexed yet: the new field finds nothing; the old one still works.
    expect((await matches(vault, schema, { age: { type: 'eq', value: 1 } })).total).toBe(0)
    expect((await matches(vault, schema, { name: { type: 'eq', value: 'n1' } })).ids).toEqual([
      ids[1],
    ])

    // Batches and writes together: updates and deletes both ahead of and behind the batches.
    await t.deps.schemas.resumeReindexes()
    const updated = [ids[0], ids[REINDEX_BATCH + 1], ids[N - 1]] as string[]
    const deleted = [ids[1], ids[2 * REINDEX_BATCH + 3], ids[N - 2]] as string[]
    const writes: Promise<unknown>[] = []
    for (const [i, id] of updated.entries()) {
      writes.push(
        t.api.put(`/v1/vaults/${vault}/documents/${id}`, {
          auth: admin,
          form: { document: b64({ name: `u${i}`, age: 100_000 + i }), schema_id: schema.id },
        }),
      )
    }
    for (const id of deleted)
      writes.push(t.api.delete(`/v1/vaults/${vault}/documents/${id}`, { auth: admin }))
    const created: Promise<string>[] = []
    for (let i = 0; i < 3; i++) {
      created.push(
        t.api
          .post(`/v1/vaults/${vault}/documents`, {
            auth: admin,
            form: { document: b64({ name: `c${i}`, age: 200_000 + i }), schema_id: schema.id },
          })
          .then((res) => {
            expect(res.statusCode, res.body).toBe(200)
            return res.json().document_id as string
          }),
      )
    }
    for (const res of (await Promise.all(writes)) as { statusCode: number; body: string }[])
      expect(res.statusCode, res.body).toBe(200)
    const createdIds = await Promise.all(created)
    await t.deps.schemas.reindexIdle()

    const done = await progress(vault, schema)
    expect(done.state).toBe('done')
    expect(done.documents_done).toBeGreaterThanOrEqual(N - deleted.length)
    // Every live document is indexed under the new fields exactly once, with its current content.
    const live = N - deleted.length + createdIds.length
    expect(
      (await matches(vault, schema, { age: { type: 'range', value: { gte: 0 } } })).total,
    ).toBe(live)
    const up = await matches(vault, schema, {
      age: { type: 'range', value: { gte: 100_000, lt: 200_000 } },
    })
    expect(up.ids.sort()).toEqual([...updated].sort())
    const made = await matches(vault, schema, { age: { type: 'range', value: { gte: 200_000 } } })
    expect(made.ids.sort()).toEqual([...createdIds].sort())
    // Old values of updated documents and deleted documents are gone.
    expect((await matches(vault, schema, { name: { type: 'eq', value: 'n0' } })).total).toBe(0)
    expect((await matches(vault, schema, { name: { type: 'eq', value: 'n1' } })).total).toBe(0)
    expect((await matches(vault, schema, { age: { type: 'eq', value: 5 } })).ids).toEqual([ids[5]])
    expect((await matches(vault, schema, { age: { type: 'eq', value: N - 3 } })).ids).toEqual([
      ids[N - 3],
    ])
  })

  it('starts over when the fields change again while batches run', async () => {
    const { vault, schema } = await vaultWith(REINDEX_BATCH + 10)
    await t.deps.schemas.stopReindexes()
    expect((await changeFields(vault, schema, AFTER)).statusCode).toBe(200)
    await t.deps.schemas.resumeReindexes()
    // Back to name only: the age rows go as each document is re-indexed again.
    expect((await changeFields(vault, schema, BEFORE)).statusCode).toBe(200)
    await t.deps.schemas.reindexIdle()
    expect(await progress(vault, schema)).toEqual({
      state: 'done',
      documents_done: REINDEX_BATCH + 10,
      documents_total: REINDEX_BATCH + 10,
    })
    const res = await t.api.post(`/v1/vaults/${vault}/search`, {
      auth: admin,
      form: optionForm({ schema_id: schema.id, filter: { age: { type: 'eq', value: 1 } } }),
    })
    expect(res.statusCode).toBe(400)
    expect((await matches(vault, schema, { name: { type: 'eq', value: 'n7' } })).total).toBe(1)
  })

  it('answers 404 for the progress of an unknown schema', async () => {
    const { vault } = await vaultWith(0)
    const res = await t.api.get(`/v1/vaults/${vault}/schemas/${randomUUID()}/reindex`, {
      auth: admin,
    })
    expect(res.statusCode).toBe(404)
  })
})
