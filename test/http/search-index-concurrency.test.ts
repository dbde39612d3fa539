import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { indexValues, type SchemaField } from '../../src/indexing/index-values.js'
import { b64, buildTestApp, type TestApp } from '../helpers/app.js'
import { optionForm, searchData } from '../helpers/search-fixtures.js'

/**
 * Index maintenance under concurrency: creates, updates (content and schema binding) and
 * deletes of one vault's documents, all in flight at once with searches between them, leave
 * search_index holding exactly the rows of the documents that remain (what `indexValues` makes of
 * their final content), and the search's totals and id-ordered pages agree with them. Every set
 * is "broad" here (searchBroadRows 1), so the pages come from the walks of migration 0016's
 * indexes. On PostgreSQL the requests run on separate pooled connections.
 */
const FIELDS: SchemaField[] = [
  { name: 'name', type: 'string', index: true },
  { name: 'age', type: 'integer', index: true },
  { name: 'tags', type: 'string', index: true },
]

interface Person {
  name: string
  age: number
  tags: string[]
}

const person = (i: number, round: number): Person => ({
  name: `p${(i * 7 + round) % 13}`,
  age: (i * 11 + round * 5) % 60,
  tags: [`t${i % 3}`, `t${(i + round) % 4}`, `t${i % 3}`],
})

describe('search index under concurrent writes', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await buildTestApp({ searchBroadRows: 1 })
  })
  afterAll(async () => {
    await t?.close()
  })

  it('keeps exactly the rows of the remaining documents, and searches agree', async () => {
    const auth = t.admin.api_key
    const vault = (await t.api.post('/v1/vaults', { auth, form: { name: 'busy' } })).json().vault
      .id as string
    const s = await t.api.post(`/v1/vaults/${vault}/schemas`, {
      auth,
      form: { schema: b64({ name: 'person', fields: FIELDS }) },
    })
    expect(s.statusCode, s.body).toBe(200)
    const schemaId = s.json().schema.id as string
    const live = new Map<string, Person>()

    const create = async (i: number) => {
      const content = person(i, 0)
      const res = await t.api.post(`/v2/vaults/${vault}/documents`, {
        auth,
        json: { document: content, schema_id: schemaId },
      })
      expect(res.statusCode, res.body).toBe(200)
      live.set(res.json().document.id as string, content)
    }
    const search = async (filter: Record<string, unknown>, page = 1) => {
      const res = await t.api.post(`/v1/vaults/${vault}/search`, {
        auth,
        form: optionForm({ schema_id: schemaId, filter, per_page: 10, page }),
      })
      expect(res.statusCode, res.body).toBe(200)
      return searchData<{ document_id: string }>(res)
    }
    await Promise.all(Array.from({ length: 40 }, (_, i) => create(i)))
    expect(live.size).toBe(40)

    // Everything at once: updates, unbinding from the schema, deletes, creates and searches.
    const ids = [...live.keys()]
    const work: Promise<unknown>[] = []
    ids.forEach((id, i) => {
      if (i % 4 === 0) {
        work.push(
          t.api.delete(`/v1/vaults/${vault}/documents/${id}`, { auth }).then((res) => {
            expect(res.statusCode, res.body).toBe(200)
            live.delete(id)
          }),
        )
      } else if (i % 4 === 1) {
        const content = person(i, 1)
        work.push(
          t.api
            .put(`/v2/vaults/${vault}/documents/${id}`, { auth, json: { document: content } })
            .then((res) => {
              expect(res.statusCode, res.body).toBe(200)
              live.set(id, content)
            }),
        )
      } else if (i % 8 === 2) {
        work.push(
          t.api
            .put(`/v2/vaults/${vault}/documents/${id}`, {
              auth,
              json: { document: person(i, 2), schema_id: null },
            })
            .then((res) => {
              expect(res.statusCode, res.body).toBe(200)
              live.delete(id)
            }),
        )
      }
      if (i % 5 === 0) work.push(search({ age: { type: 'range', value: { gte: 10 } } }))
    })
    for (let i = 40; i < 50; i++) work.push(create(i))
    await Promise.all(work)

    // The index holds exactly the remaining documents' rows.
    const rows = await t.deps.store.db
      .selectFrom('search_index')
      .select(['doc_id', 'field', 'ord', 'value_text', 'value_lower', 'value_num'])
      .where('account_id', '=', t.admin.account_id)
      .where('schema_id', '=', schemaId)
      .execute()
    const key = (r: { doc_id: string; field: string; ord: number }) =>
      `${r.doc_id}/${r.field}/${r.ord}`
    const actual = rows
      .map((r) => ({ ...r, value_num: r.value_num === null ? null : Number(r.value_num) }))
      .sort((a, b) => key(a).localeCompare(key(b)))
    const expected = [...live.entries()]
      .flatMap(([doc_id, content]) =>
        indexValues(FIELDS, content).map((v) => ({
          doc_id,
          field: v.field,
          ord: v.ord,
          value_text: v.value_text,
          value_lower: v.value_lower,
          value_num: v.value_num,
        })),
      )
      .sort((a, b) => key(a).localeCompare(key(b)))
    expect(actual).toEqual(expected)

    // Totals and id-ordered pages agree with the remaining documents.
    const older = [...live.entries()].filter(([, c]) => c.age >= 10).map(([id]) => id)
    const first = await search({ age: { type: 'range', value: { gte: 10 } } })
    expect(first.info.total_result_count).toBe(older.length)
    expect(first.documents.map((d) => d.document_id)).toEqual(older.sort().slice(0, 10))
    const withT0 = [...live.entries()].filter(([, c]) => c.tags.includes('t0')).map(([id]) => id)
    const tagged = await search({ tags: { type: 'eq', value: 't0' } })
    expect(tagged.info.total_result_count).toBe(withT0.length)
    expect(tagged.documents.map((d) => d.document_id)).toEqual(withT0.sort().slice(0, 10))
    const notT0 = [...live.keys()].filter((id) => !withT0.includes(id))
    const untagged = await search({ tags: { type: 'not', value: 't0' } })
    expect(untagged.info.total_result_count).toBe(notT0.length)
  })
})
