import { randomUUID } from 'node:crypto'
import {
  CompiledQuery,
  createQueryId,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { indexValues, type SchemaField } from '../../src/indexing/index-values.js'
import { newId } from '../../src/lib/ids.js'
import { searchDocuments } from '../../src/modules/search/search.repo.js'
import { resolveSearch } from '../../src/modules/search/search-fields.js'
import { MAX_SORT_KEYS, parseOptionShape } from '../../src/modules/search/search-options.js'
import type { DocumentsTable, SearchIndexTable } from '../../src/store/schema.js'
import { buildTestApp, errorOf, type TestApp } from '../helpers/app.js'
import {
  insertSchema,
  optionForm,
  searchData,
  type TestSchema,
} from '../helpers/search-fixtures.js'
import { testDialect } from '../helpers/store.js'

/**
 * Sorted search scales with the candidates (security review, finding 2): each sort key is one
 * seek per candidate through the (account, schema, field, doc_id, values) index, never a walk
 * of the whole field per candidate; and a search takes at most MAX_SORT_KEYS keys.
 */
const FIELDS: SchemaField[] = [
  { name: 'name', type: 'string', index: true },
  { name: 'rank', type: 'integer', index: true },
  { name: 'kind', type: 'string', index: true },
  { name: 'a', type: 'string', index: true },
  { name: 'b', type: 'string', index: true },
  { name: 'c', type: 'string', index: true },
]
const DOCUMENTS = 3000

class CaptureQueries implements KyselyPlugin {
  readonly nodes: RootOperationNode[] = []
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.nodes.push(args.node)
    return args.node
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result
  }
}

describe('sorted search at scale', () => {
  let t: TestApp
  let vault: string
  let schema: TestSchema
  /** Every document's id and name, in the order a name sort must give. */
  let byName: { id: string; name: string }[]

  beforeAll(async () => {
    t = await buildTestApp()
    const accountId = t.admin.account_id
    const v = await t.api.post('/v1/vaults', {
      auth: t.admin.api_key,
      form: { name: `v-${randomUUID()}` },
    })
    vault = v.json().vault.id
    schema = await insertSchema(t, accountId, vault, FIELDS)
    // Written in bulk (the fixtures' one-by-one writes would dominate the test's time).
    const now = new Date().toISOString()
    const docs: DocumentsTable[] = []
    const index: SearchIndexTable[] = []
    for (let i = 0; i < DOCUMENTS; i++) {
      const id = newId()
      const content = {
        name: `n${((i * 7919) % DOCUMENTS).toString().padStart(5, '0')}`,
        rank: i % 10,
        kind: 'k',
        a: 'x',
        b: 'y',
        c: ['p', 'q'],
      }
      const sealed = await t.deps.keyring.encrypt(
        accountId,
        JSON.stringify(content),
        `document\n${vault}\n${id}`,
      )
      docs.push({
        account_id: accountId,
        vault_id: vault,
        id,
        owner_id: null,
        schema_id: schema.id,
        schema_bound: 1,
        content: sealed,
        created_at: now,
        updated_at: now,
      })
      for (const row of indexValues(FIELDS, content))
        index.push({ account_id: accountId, schema_id: schema.id, doc_id: id, ...row })
    }
    await t.deps.store.db.transaction().execute(async (trx) => {
      for (let i = 0; i < docs.length; i += 500)
        await trx
          .insertInto('documents')
          .values(docs.slice(i, i + 500))
          .execute()
      for (let i = 0; i < index.length; i += 1000)
        await trx
          .insertInto('search_index')
          .values(index.slice(i, i + 1000))
          .execute()
    })
    byName = docs
      .map((d, i) => ({
        id: d.id,
        name: `n${((i * 7919) % DOCUMENTS).toString().padStart(5, '0')}`,
      }))
      .sort((x, y) => (x.name < y.name ? -1 : 1))
  }, 120_000)
  afterAll(() => t?.close())

  const search = (option: Record<string, unknown>) =>
    t.api.post(`/v1/vaults/${vault}/search`, {
      auth: t.admin.api_key,
      multipart: optionForm({ schema_id: schema.id, ...option }),
    })
  const all = { kind: { type: 'eq', value: 'k' } }

  it(`takes up to ${MAX_SORT_KEYS} sort keys; one more is a 400 naming search_option.sort`, async () => {
    const five = [{ name: 'asc' }, { rank: 'desc' }, { a: 'asc' }, { b: 'desc' }, { c: 'asc' }]
    expect(five).toHaveLength(MAX_SORT_KEYS)
    const ok = searchData<{ document_id: string }>(
      await search({ filter: all, sort: five, per_page: 5 }),
    )
    expect(ok.info.total_result_count).toBe(DOCUMENTS)
    const six = await search({ filter: all, sort: [...five, { kind: 'asc' }] })
    expect(six.statusCode, six.body).toBe(400)
    expect(errorOf(six)).toMatchObject({ code: 'INVALID_PARAMETER' })
    expect(errorOf(six).message).toMatch(/^search_option\.sort must have at most 5 keys/)
    // 2,000 keys (once a 500 from SQLite's expression limits) is the same clear 400.
    const many = await search({ filter: all, sort: Array(2000).fill({ name: 'asc' }) })
    expect(many.statusCode, many.body).toBe(400)
    expect(errorOf(many).message).toMatch(/^search_option\.sort /)
  })

  it('sorts every candidate by a string key correctly, paging through the results', async () => {
    const page = (n: number) =>
      search({ filter: all, sort: [{ name: 'asc' }], page: n, per_page: 100 })
    const first = searchData<{ document_id: string }>(await page(1))
    const fifth = searchData<{ document_id: string }>(await page(5))
    expect(first.info.total_result_count).toBe(DOCUMENTS)
    expect(first.documents.map((d) => d.document_id)).toEqual(byName.slice(0, 100).map((d) => d.id))
    expect(fifth.documents.map((d) => d.document_id)).toEqual(
      byName.slice(400, 500).map((d) => d.id),
    )
    const desc = searchData<{ document_id: string }>(
      await search({ filter: all, sort: [{ name: 'desc' }], per_page: 3 }),
    )
    expect(desc.documents.map((d) => d.document_id)).toEqual(
      byName
        .slice(-3)
        .reverse()
        .map((d) => d.id),
    )
  })

  it("reads each candidate's sort key by one seek on (account, schema, field, doc_id)", async () => {
    const capture = new CaptureQueries()
    const db = t.deps.store.db
    const option = { schema_id: schema.id, filter: all, sort: [{ name: 'asc' }, { rank: 'desc' }] }
    await searchDocuments(db.withPlugin(capture), {
      accountId: t.admin.account_id,
      vaultId: vault,
      schemaId: schema.id,
      scopes: [{ all: true, ids: new Set(), ownerIds: new Set(), anyOwner: false }],
      query: resolveSearch(parseOptionShape(option, 'vault'), FIELDS),
    })
    const page = capture.nodes
      .map((node) => db.getExecutor().compileQuery(node, createQueryId()))
      .find((q) => /order by/i.test(q.sql))
    if (!page) throw new Error('no page statement captured')
    if (testDialect === 'sqlite') {
      const { rows } = await db.executeQuery<{ detail: string }>(
        CompiledQuery.raw(`explain query plan ${page.sql}`, [...page.parameters]),
      )
      const details = rows.map((r) => r.detail)
      // Every read of a sort key (SQLite may plan a key's subquery more than once) is a
      // covering seek by document, never a walk of the field through a value index.
      const keyReads = details.filter((d) => /^(SEARCH|SCAN) k\b/.test(d))
      expect(keyReads.length, details.join('\n')).toBeGreaterThanOrEqual(2)
      for (const read of keyReads) {
        expect(read).toMatch(
          /^SEARCH k USING COVERING INDEX search_index_probe \(account_id=\? AND schema_id=\? AND field=\? AND doc_id=\?\)$/,
        )
      }
    } else {
      const { rows } = await db.executeQuery<{ 'QUERY PLAN': unknown }>(
        CompiledQuery.raw(`explain (analyze, format json) ${page.sql}`, [...page.parameters]),
      )
      const plan = JSON.stringify(rows[0]?.['QUERY PLAN'])
      // Every node that reads search_index for a sort key (a SubPlan) seeks by doc_id and
      // visits only that document's rows: no row is read and then thrown away.
      const nodes: Record<string, unknown>[] = []
      const walk = (n: Record<string, unknown>) => {
        nodes.push(n)
        for (const child of (n.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child)
      }
      walk((JSON.parse(plan) as { Plan: Record<string, unknown> }[])[0]?.Plan ?? {})
      const subplans = nodes.filter((n) => String(n['Subplan Name'] ?? '').startsWith('SubPlan'))
      // Two keys (a key may be planned twice: once for its value, once for its NULL test).
      expect(subplans.length, plan).toBeGreaterThanOrEqual(2)
      const reads: Record<string, unknown>[] = []
      for (const s of subplans) {
        const stack = [s]
        while (stack.length) {
          const n = stack.pop() as Record<string, unknown>
          if (n['Relation Name'] === 'search_index') reads.push(n)
          stack.push(...((n.Plans as Record<string, unknown>[] | undefined) ?? []))
        }
      }
      expect(reads.length, plan).toBe(subplans.length)
      // Loops = candidates; per loop it reads that document's own rows only (7 here), where a
      // walk of the field would read and drop ~half the field's rows for each candidate.
      const rowsPerDocument = indexValues(FIELDS, {
        name: 'n',
        rank: 1,
        kind: 'k',
        a: 'x',
        b: 'y',
        c: ['p', 'q'],
      }).length
      for (const r of reads) {
        expect(String(r['Index Cond']), plan).toMatch(/doc_id = d\.id/)
        expect(Number(r['Actual Loops']), plan).toBe(DOCUMENTS)
        const visited = Number(r['Actual Rows']) + Number(r['Rows Removed by Filter'] ?? 0)
        expect(visited, plan).toBeLessThanOrEqual(rowsPerDocument)
      }
    }
  })
})
