import { randomUUID } from 'node:crypto'
import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { searchDocuments } from '../../src/modules/search/search.repo.js'
import { resolveSearch } from '../../src/modules/search/search-fields.js'
import { MAX_FILTER_VALUES, parseOptionShape } from '../../src/modules/search/search-options.js'
import { buildTestApp, errorOf, type TestApp } from '../helpers/app.js'
import {
  insertDocument,
  insertSchema,
  optionForm,
  searchData,
  type TestSchema,
} from '../helpers/search-fixtures.js'

/**
 * Filter values per search (security review, finding 5): at most MAX_FILTER_VALUES in all, and
 * `in` lists bound as one parameter, so a list's length changes neither the statement's text
 * (one cached statement) nor its variable count (once a 500 "too many SQL variables").
 */
const FIELDS: SchemaField[] = Array.from({ length: 40 }, (_, i) => ({
  name: `f${i}`,
  type: 'string' as const,
  index: true,
}))

describe('search filter values', () => {
  let t: TestApp
  let vault: string
  let schema: TestSchema
  let docs: string[]

  beforeAll(async () => {
    t = await buildTestApp()
    const v = await t.api.post('/v1/vaults', {
      auth: t.admin.api_key,
      form: { name: `v-${randomUUID()}` },
    })
    vault = v.json().vault.id
    schema = await insertSchema(t, t.admin.account_id, vault, FIELDS)
    docs = []
    for (const value of ['v1', 'v500', 'other']) {
      docs.push(
        await insertDocument(t, {
          accountId: t.admin.account_id,
          vaultId: vault,
          schema,
          content: { f0: value, f1: value },
        }),
      )
    }
  })
  afterAll(() => t?.close())

  const search = (option: Record<string, unknown>) =>
    t.api.post(`/v1/vaults/${vault}/search`, {
      auth: t.admin.api_key,
      multipart: optionForm({ schema_id: schema.id, ...option }),
    })
  const list = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `v${from + i}`)

  it(`accepts ${MAX_FILTER_VALUES} filter values in all and matches through bound lists`, async () => {
    const res = await search({
      filter_type: 'or',
      filter: {
        f0: { type: 'in', value: list(600) },
        f1: { type: 'in', value: list(399, 600) },
        f2: { type: 'eq', value: 'nothing' },
      },
    })
    const data = searchData<{ document_id: string }>(res)
    expect(data.documents.map((d) => d.document_id).sort()).toEqual([docs[0], docs[1]].sort())
  })

  it('answers 400 naming the filter that passes the total, one value beyond', async () => {
    const res = await search({
      filter: {
        f0: { type: 'in', value: list(600) },
        f1: { type: 'in', value: list(399) },
        f2: { type: 'not_in', value: ['a', 'b'] },
      },
    })
    expect(res.statusCode, res.body).toBe(400)
    expect(errorOf(res)).toMatchObject({ code: 'INVALID_PARAMETER' })
    expect(errorOf(res).message).toMatch(
      /^search_option\.filter\.f2\.value brings the search to more than 1000 filter values/,
    )
  })

  it('answers 40 in filters of 1,000 values each with a 400, not a 500', async () => {
    const filter = Object.fromEntries(
      FIELDS.map((f) => [f.name, { type: 'in', value: list(1000) }]),
    )
    const res = await search({ filter })
    expect(res.statusCode, res.body).toBe(400)
    expect(errorOf(res).message).toMatch(/^search_option\.filter\.f1\.value brings the search/)
  })

  it('compiles in lists of any length to the same statement text', async () => {
    const texts = new Set<string>()
    const capture: KyselyPlugin = {
      transformQuery: (args: PluginTransformQueryArgs) => {
        texts.add(t.deps.store.db.getExecutor().compileQuery(args.node, args.queryId).sql)
        return args.node
      },
      transformResult: async (args: PluginTransformResultArgs) => args.result,
    }
    for (const n of [2, 3, 999]) {
      const option = { schema_id: schema.id, filter: { f0: { type: 'in', value: list(n) } } }
      await searchDocuments(t.deps.store.db.withPlugin(capture), {
        accountId: t.admin.account_id,
        vaultId: vault,
        schemaId: schema.id,
        scopes: [{ all: true, ids: new Set(), ownerIds: new Set(), anyOwner: false }],
        query: resolveSearch(parseOptionShape(option, 'vault'), FIELDS),
      })
    }
    // One bounded estimate, one count and one page statement, whatever the list's length.
    expect(texts.size).toBe(3)
  })
})
