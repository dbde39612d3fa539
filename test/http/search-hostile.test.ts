import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import {
  MAX_FILTERS,
  MAX_LIST_ITEMS,
  MAX_PATTERN,
  MAX_PATTERN_WILDCARDS,
  MAX_SORT_KEYS,
} from '../../src/modules/search/search-options.js'
import { buildTestApp, errorOf, type TestApp } from '../helpers/app.js'
import {
  insertDocument,
  insertSchema,
  optionForm,
  searchData,
  type TestSchema,
} from '../helpers/search-fixtures.js'

/**
 * Hostile searches have bounded cost (issue 14, point 3): every documented limit of the search
 * option is served at its edge and refused one beyond it, with a 400 naming the part. (The
 * total of filter values is search-limits.test.ts; the time bound search-bound.test.ts and
 * search-workers.test.ts.)
 */
const FIELDS: SchemaField[] = Array.from({ length: MAX_FILTERS + 1 }, (_, i) => ({
  name: `f${i}`,
  type: 'string' as const,
  index: true,
}))

describe('search option limits at their edges', () => {
  let t: TestApp
  let vault: string
  let schema: TestSchema
  let doc: string

  beforeAll(async () => {
    t = await buildTestApp()
    const v = await t.api.post('/v1/vaults', {
      auth: t.admin.api_key,
      form: { name: `v-${randomUUID()}` },
    })
    vault = v.json().vault.id
    schema = await insertSchema(t, t.admin.account_id, vault, FIELDS)
    doc = await insertDocument(t, {
      accountId: t.admin.account_id,
      vaultId: vault,
      schema,
      content: Object.fromEntries(FIELDS.map((f) => [f.name, 'a'.repeat(40)])),
    })
  })
  afterAll(() => t?.close())

  const search = (option: Record<string, unknown>) =>
    t.api.post(`/v1/vaults/${vault}/search`, {
      auth: t.admin.api_key,
      multipart: optionForm({ schema_id: schema.id, ...option }),
    })
  const found = async (option: Record<string, unknown>) => {
    const res = await search(option)
    return searchData<{ document_id: string }>(res).documents.map((d) => d.document_id)
  }
  const refused = async (option: Record<string, unknown>, part: string) => {
    const res = await search(option)
    expect(res.statusCode, res.body).toBe(400)
    expect(errorOf(res)).toMatchObject({ code: 'INVALID_PARAMETER' })
    expect(errorOf(res).message.startsWith(`search_option.${part} `)).toBe(true)
  }
  const list = (n: number) => [...Array.from({ length: n - 1 }, (_, i) => `x${i}`), 'a'.repeat(40)]

  for (const type of ['in', 'not_in'] as const) {
    it(`${type}: ${MAX_LIST_ITEMS} items served, one more refused naming the value`, async () => {
      const hits = await found({ filter: { f0: { type, value: list(MAX_LIST_ITEMS) } } })
      expect(hits).toEqual(type === 'in' ? [doc] : [])
      await refused(
        { filter: { f0: { type, value: list(MAX_LIST_ITEMS + 1) } } },
        'filter.f0.value',
      )
    })
  }

  it(`wildcard: ${MAX_PATTERN} characters served, one more refused`, async () => {
    const edge = `*${'a'.repeat(MAX_PATTERN - 1)}`
    expect(await found({ filter: { f0: { type: 'wildcard', value: edge } } })).toEqual([])
    await refused({ filter: { f0: { type: 'wildcard', value: `${edge}a` } } }, 'filter.f0.value')
  })

  it(`wildcard: ${MAX_PATTERN_WILDCARDS} wildcards served (the worst shape), one more refused`, async () => {
    // `*a*a…*b` against a long run of `a`: the shape that makes a naive matcher backtrack.
    const worst = (n: number) => `${'*a'.repeat(n)}b`
    expect(
      await found({ filter: { f0: { type: 'wildcard', value: worst(MAX_PATTERN_WILDCARDS) } } }),
    ).toEqual([])
    const mixed = `${'?'.repeat(MAX_PATTERN_WILDCARDS - 1)}*`
    expect(await found({ filter: { f0: { type: 'wildcard', value: mixed } } })).toEqual([doc])
    await refused(
      { filter: { f0: { type: 'wildcard', value: worst(MAX_PATTERN_WILDCARDS + 1) } } },
      'filter.f0.value',
    )
    await refused({ filter: { f0: { type: 'wildcard', value: `?${mixed}` } } }, 'filter.f0.value')
  })

  it(`sort: ${MAX_SORT_KEYS} keys served, one more refused`, async () => {
    const sort = (n: number) => FIELDS.slice(0, n).map((f) => ({ [f.name]: 'desc' }))
    const filter = { f0: { type: 'eq', value: 'a'.repeat(40) } }
    expect(await found({ filter, sort: sort(MAX_SORT_KEYS) })).toEqual([doc])
    await refused({ filter, sort: sort(MAX_SORT_KEYS + 1) }, 'sort')
  })

  it(`filter: ${MAX_FILTERS} filters served (and, or), one more refused`, async () => {
    const filters = (n: number) =>
      Object.fromEntries(
        FIELDS.slice(0, n).map((f) => [f.name, { type: 'wildcard', value: '*a*' }]),
      )
    for (const filter_type of ['and', 'or']) {
      expect(await found({ filter_type, filter: filters(MAX_FILTERS) })).toEqual([doc])
    }
    await refused({ filter: filters(MAX_FILTERS + 1) }, 'filter')
  })

  it('filters do not nest: a filter inside a filter is refused naming it', async () => {
    await refused(
      { filter: { f0: { type: 'eq', value: 'x', filter: { f1: { type: 'eq', value: 'y' } } } } },
      'filter.f0.filter',
    )
  })
})
