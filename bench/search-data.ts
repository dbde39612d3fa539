/**
 * The search bench's data, made inside the server child before it listens: N documents in one
 * vault under one schema, written straight through Kysely (the API would take hours at 1M).
 *
 * - The vault and schema are created through the API (app.inject), as a client would.
 * - Each document's content is sealed with the real keyring, bound to its own vault and id,
 *   exactly as DocumentsService seals it (one AES-256-GCM encryption per document).
 * - Its index rows are `indexValues(schema fields, content)`: what the app's indexer writes.
 * - Rows go in with batched multi-row INSERTs, one transaction per batch of documents.
 * Afterwards two documents are checked through the API: read back (decrypted) and re-indexed
 * (POST …/reindex must leave their index rows unchanged).
 */
import { isDeepStrictEqual } from 'node:util'
import type { FastifyInstance } from 'fastify'
import {
  CompiledQuery,
  createQueryId,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  sql,
  type UnknownRow,
} from 'kysely'
import type { Keyring } from '../src/crypto/keyring.js'
import { indexValues, type SchemaField } from '../src/indexing/index-values.js'
import { newId } from '../src/lib/ids.js'
import { searchDocuments } from '../src/modules/search/search.repo.js'
import { resolveSearch } from '../src/modules/search/search-fields.js'
import { parseOptionShape } from '../src/modules/search/search-options.js'
import type { Executor } from '../src/store/executor.js'
import type { DocumentsTable, SearchIndexTable } from '../src/store/schema.js'
import type { SearchPlan, SearchPopulation, SearchStatement, SearchStorage } from './protocol.js'
import {
  GEO_BOX_KM,
  GEO_CENTER,
  OWNED_EVERY,
  POPULATE,
  SEARCH_SCHEMA,
  type SearchQueryDef,
  STATUSES,
  TAGS,
  usesOn,
} from './search-queries.js'

type Dialect = 'sqlite' | 'postgres'

export interface BenchDocument {
  status: string
  age: number
  name: string
  tags: string[]
  joined: string
  loc: { lat: number; long: number }
}

/** mulberry32: small, fast, deterministic (the same N gives the same documents every run). */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const DAY_MS = 86_400_000
const JOINED_FROM = Date.UTC(2010, 0, 1)
const JOINED_DAYS = Math.round((Date.UTC(2026, 0, 1) - JOINED_FROM) / DAY_MS)
const KM_PER_DEGREE_LAT = 111.195
const HALF_BOX_LAT = GEO_BOX_KM / KM_PER_DEGREE_LAT / 2
const HALF_BOX_LONG = HALF_BOX_LAT / Math.cos((GEO_CENTER.lat * Math.PI) / 180)

/** Documents from a seeded generator: uniform statuses, ages, letters, tags, days and points. */
export function documentGenerator(seed = 1): () => BenchDocument {
  const rnd = prng(seed)
  const int = (n: number) => Math.floor(rnd() * n)
  // Uniform random lowercase letters: a name starts with a given two letters 1 time in 676.
  const word = () => {
    let w = ''
    for (let i = 4 + int(6); i > 0; i--) w += String.fromCharCode(97 + int(26))
    return w
  }
  const round6 = (x: number) => Math.round(x * 1e6) / 1e6
  return () => {
    const tags = new Set<string>()
    for (let k = 1 + int(3); tags.size < k; ) tags.add(TAGS[int(TAGS.length)] as string)
    return {
      status: STATUSES[int(STATUSES.length)] as string,
      age: int(100),
      name: `${word()} ${word()}`,
      tags: [...tags],
      joined: new Date(JOINED_FROM + int(JOINED_DAYS) * DAY_MS).toISOString().slice(0, 10),
      loc: {
        lat: round6(GEO_CENTER.lat + (rnd() * 2 - 1) * HALF_BOX_LAT),
        long: round6(GEO_CENTER.long + (rnd() * 2 - 1) * HALF_BOX_LONG),
      },
    }
  }
}

export interface SearchTarget {
  accountId: string
  vaultId: string
  schemaId: string
  /** The schema's fields as the app stored them (what its indexer reads). */
  fields: SchemaField[]
  /** The owner-scoped user: owns every OWNED_EVERY-th document, reads only those. */
  owner: { id: string; apiKey: string }
}

/** The vault and its schema, through the public API (before listening). */
export async function createSearchTarget(
  app: FastifyInstance,
  db: Executor,
  adminApiKey: string,
  accountId: string,
  vaultName = 'bench-search',
): Promise<SearchTarget> {
  const authorization = `Basic ${Buffer.from(`${adminApiKey}:`).toString('base64')}`
  const call = async (url: string, payload: object, form = false) => {
    const res = await app.inject({
      method: 'POST',
      url,
      headers: {
        authorization,
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      payload: form
        ? new URLSearchParams(payload as Record<string, string>).toString()
        : (payload as Record<string, unknown>),
    })
    if (res.statusCode < 200 || res.statusCode >= 300) {
      throw new Error(
        `search fixture POST ${url}: HTTP ${res.statusCode}: ${res.body.slice(0, 300)}`,
      )
    }
    return res.json() as Record<string, unknown>
  }
  const vault = (await call('/v1/vaults', { name: vaultName })).vault as { id: string }
  const schemaB64 = Buffer.from(JSON.stringify(SEARCH_SCHEMA)).toString('base64')
  const created = await call(`/v1/vaults/${vault.id}/schemas`, { schema: schemaB64 }, true)
  const schemaId = (created.schema as { id: string }).id
  const policy = [
    {
      Resources: [`Vault::${vault.id}::Search::`, `Vault::${vault.id}::Document::$[Owner=self]`],
      Activities: 'R',
    },
  ]
  const policyB64 = Buffer.from(JSON.stringify(policy)).toString('base64')
  const group = (await call('/v1/groups', { name: `owners-${vault.id}`, policy: policyB64 }, true))
    .group as { id: string }
  const user = (
    await call('/v1/users', { username: `owner-${vault.id}`, group_ids: group.id }, true)
  ).user as { id: string; api_key: string }
  const row = await db
    .selectFrom('schemas')
    .select('fields')
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vault.id)
    .where('id', '=', schemaId)
    .executeTakeFirstOrThrow()
  return {
    accountId,
    vaultId: vault.id,
    schemaId,
    fields: JSON.parse(row.fields) as SchemaField[],
    owner: { id: user.id, apiKey: user.api_key },
  }
}

type Row = DocumentsTable | SearchIndexTable

/**
 * Multi-row INSERTs of `chunk` rows. Kysely compiles the statement once per table and row count
 * (checked against its own parameters the first time); later chunks only swap the parameters,
 * which spares building and compiling a 10,000-value query tree per statement.
 */
class ChunkedInsert {
  readonly #compiled = new Map<string, { sql: string; columns: string[] }>()

  constructor(private readonly chunk: number) {}

  async insert(trx: Executor, table: 'documents' | 'search_index', rows: readonly Row[]) {
    for (let i = 0; i < rows.length; i += this.chunk) {
      const part = rows.slice(i, i + this.chunk)
      const key = `${table}:${part.length}`
      let statement = this.#compiled.get(key)
      const columns = statement?.columns ?? Object.keys(part[0] as Row)
      const parameters = part.flatMap((r) => columns.map((c) => (r as never)[c] as unknown))
      if (!statement) {
        const compiled = trx
          .insertInto(table)
          .values(part as never)
          .compile()
        if (!isDeepStrictEqual([...compiled.parameters], parameters)) {
          throw new Error(`search data: unexpected parameter order for ${table}`)
        }
        statement = { sql: compiled.sql, columns }
        this.#compiled.set(key, statement)
      }
      await trx.executeQuery(CompiledQuery.raw(statement.sql, parameters))
    }
  }
}

export interface Populated {
  population: SearchPopulation
  /** The name of the first document (the control query's value). */
  controlName: string
  /** First and last document ids (checked through the API afterwards). */
  sampleIds: string[]
  samples: BenchDocument[]
}

/** Fills the target with `n` generated documents and their index rows. */
export async function populate(
  db: Executor,
  dialect: Dialect,
  keyring: Keyring,
  target: SearchTarget,
  n: number,
  log: (line: string) => void,
): Promise<Populated> {
  const { accountId, vaultId, schemaId, fields } = target
  const next = documentGenerator()
  // The first encryption may create the account's data key: never inside a transaction.
  await keyring.preload(accountId)
  let previousCache: unknown
  if (dialect === 'sqlite') {
    previousCache = (await sql<{ cache_size: number }>`pragma cache_size`.execute(db)).rows[0]
      ?.cache_size
    await sql.raw(`pragma cache_size = -${POPULATE.sqliteCacheMiB * 1024}`).execute(db)
  }
  const t = { generate: 0, seal: 0, insert: 0 }
  let indexRows = 0
  const samples: BenchDocument[] = []
  const sampleIds: string[] = []
  const documentInserts = new ChunkedInsert(POPULATE.documentRowsPerInsert)
  const indexInserts = new ChunkedInsert(POPULATE.indexRowsPerInsert)
  const started = performance.now()
  let lastLog = started
  try {
    for (let done = 0; done < n; ) {
      const count = Math.min(POPULATE.docsPerTransaction, n - done)
      let t0 = performance.now()
      const docs = Array.from({ length: count }, next)
      const ids = docs.map(() => newId())
      const now = new Date().toISOString()
      const index: SearchIndexTable[] = []
      docs.forEach((doc, i) => {
        for (const row of indexValues(fields, doc)) {
          index.push({
            account_id: accountId,
            schema_id: schemaId,
            doc_id: ids[i] as string,
            ...row,
          })
        }
      })
      let t1 = performance.now()
      t.generate += t1 - t0
      t0 = t1
      // DocumentsService.#seal, verbatim: the JSON text, bound to the vault and document id.
      const sealed = await Promise.all(
        docs.map((doc, i) =>
          keyring.encrypt(accountId, JSON.stringify(doc), `document\n${vaultId}\n${ids[i]}`),
        ),
      )
      t1 = performance.now()
      t.seal += t1 - t0
      t0 = t1
      const rows: DocumentsTable[] = docs.map((_, i) => ({
        account_id: accountId,
        vault_id: vaultId,
        id: ids[i] as string,
        owner_id: (done + i) % OWNED_EVERY === 0 ? target.owner.id : null,
        schema_id: schemaId,
        schema_bound: 1,
        content: sealed[i] as string,
        created_at: now,
        updated_at: now,
      }))
      await db.transaction().execute(async (trx) => {
        await documentInserts.insert(trx, 'documents', rows)
        await indexInserts.insert(trx, 'search_index', index)
      })
      t.insert += performance.now() - t0
      if (done === 0) {
        samples.push(docs[0] as BenchDocument)
        sampleIds.push(ids[0] as string)
      }
      if (done + count === n) {
        samples.push(docs[count - 1] as BenchDocument)
        sampleIds.push(ids[count - 1] as string)
      }
      indexRows += index.length
      done += count
      if (performance.now() - lastLog > 10_000) {
        lastLog = performance.now()
        const s = (lastLog - started) / 1000
        log(`search data: ${done}/${n} documents after ${s.toFixed(0)} s`)
      }
    }
  } finally {
    if (dialect === 'sqlite' && typeof previousCache === 'number') {
      await sql.raw(`pragma cache_size = ${previousCache}`).execute(db)
    }
  }
  const finishStart = performance.now()
  let finish: string
  if (dialect === 'sqlite') {
    await sql`pragma wal_checkpoint(TRUNCATE)`.execute(db)
    finish = 'WAL checkpoint (TRUNCATE)'
  } else {
    // What autovacuum would do soon after a bulk load: statistics and the visibility map.
    await sql`vacuum analyze documents`.execute(db)
    await sql`vacuum analyze search_index`.execute(db)
    finish = 'VACUUM ANALYZE documents, search_index (what autovacuum does after a bulk load)'
  }
  const finishMs = performance.now() - finishStart
  return {
    population: {
      documents: n,
      indexRows,
      generateMs: t.generate,
      sealMs: t.seal,
      insertMs: t.insert,
      finishMs,
      finish,
      totalMs: performance.now() - started,
    },
    controlName: (samples[0] as BenchDocument).name,
    sampleIds,
    samples,
  }
}

/**
 * Checks the data against the app itself: each sample reads back through the API as generated
 * (so its content was sealed the way the app opens it), and re-indexing it through the API
 * (POST …/reindex: decrypt, then the app's indexer) leaves its index rows exactly as written.
 */
export async function verifySamples(
  app: FastifyInstance,
  db: Executor,
  adminApiKey: string,
  target: SearchTarget,
  populated: Populated,
): Promise<void> {
  const authorization = `Basic ${Buffer.from(`${adminApiKey}:`).toString('base64')}`
  const indexRowsOf = (id: string) =>
    db
      .selectFrom('search_index')
      .selectAll()
      .where('account_id', '=', target.accountId)
      .where('doc_id', '=', id)
      .orderBy('field')
      .orderBy('ord')
      .execute()
  for (const [i, id] of populated.sampleIds.entries()) {
    const read = await app.inject({
      method: 'GET',
      url: `/v2/vaults/${target.vaultId}/documents/${id}`,
      headers: { authorization },
    })
    const body = read.json() as { documents?: { document?: unknown }[] }
    if (
      read.statusCode !== 200 ||
      !isDeepStrictEqual(body.documents?.[0]?.document, populated.samples[i])
    ) {
      throw new Error(`search data: document ${id} does not read back: ${read.body.slice(0, 300)}`)
    }
    const before = await indexRowsOf(id)
    const reindex = await app.inject({
      method: 'POST',
      url: `/v1/vaults/${target.vaultId}/documents/${id}/reindex`,
      headers: { authorization },
    })
    if (reindex.statusCode !== 200) {
      throw new Error(`search data: reindex ${id}: HTTP ${reindex.statusCode}: ${reindex.body}`)
    }
    const after = await indexRowsOf(id)
    if (before.length === 0 || !isDeepStrictEqual(before, after)) {
      throw new Error(`search data: the app indexes document ${id} differently than the bench did`)
    }
  }
}

/** Database size: SQLite file + WAL (and dbstat per table/index), or the schema's relations. */
export async function measureStorage(
  db: Executor,
  dialect: Dialect,
  sqliteBytes: () => number,
): Promise<SearchStorage> {
  if (dialect === 'sqlite') {
    const { rows } = await sql<{
      name: string
      bytes: number
    }>`select name, sum(pgsize) as bytes from dbstat group by name order by bytes desc`.execute(db)
    return {
      totalBytes: sqliteBytes(),
      objects: rows.map((r) => ({ name: r.name, bytes: Number(r.bytes) })),
    }
  }
  const { rows } = await sql<{ name: string; bytes: string }>`
    select c.relname as name,
      case when c.relkind = 'i' then pg_relation_size(c.oid) else pg_table_size(c.oid) end as bytes
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = current_schema() and c.relkind in ('r', 'i')
    order by bytes desc`.execute(db)
  const objects = rows.map((r) => ({ name: r.name, bytes: Number(r.bytes) }))
  return { totalBytes: objects.reduce((sum, o) => sum + o.bytes, 0), objects }
}

/** Keeps the query nodes the app builds (the search's count and page statements). */
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

/** SQLite's EXPLAIN QUERY PLAN rows as an indented tree. */
function sqlitePlan(rows: { id: number; parent: number; detail: string }[]): string[] {
  const depth = new Map<number, number>([[0, -1]])
  return rows.map((r) => {
    const d = (depth.get(r.parent) ?? -1) + 1
    depth.set(r.id, d)
    return `${'  '.repeat(d)}${r.detail}`
  })
}

/**
 * Runs each query's search through the app's own repository code (searchDocuments, as the
 * admin sees it) to capture its SQL, then times each statement once more on its own and
 * explains it (SQLite: EXPLAIN QUERY PLAN; PostgreSQL: EXPLAIN).
 */
export async function explainQueries(
  db: Executor,
  dialect: Dialect,
  target: SearchTarget,
  queries: readonly SearchQueryDef[],
): Promise<SearchPlan[]> {
  const plans: SearchPlan[] = []
  const everything = {
    all: true,
    ids: new Set<string>(),
    ownerIds: new Set<string>(),
    anyOwner: false,
  }
  // What the owner-scoped caller's grants resolve to (the policy of createSearchTarget).
  const ownDocuments = {
    all: false,
    ids: new Set<string>(),
    ownerIds: new Set([target.owner.id]),
    anyOwner: false,
  }
  for (const q of queries) {
    const capture = new CaptureQueries()
    await searchDocuments(db.withPlugin(capture), {
      accountId: target.accountId,
      vaultId: target.vaultId,
      schemaId: target.schemaId,
      scopes: [q.caller === 'owner' ? ownDocuments : everything],
      query: resolveSearch(parseOptionShape(q.option, 'vault'), target.fields),
    })
    const statements: SearchStatement[] = []
    for (const node of capture.nodes) {
      const compiled = db.getExecutor().compileQuery(node, createQueryId())
      const t0 = performance.now()
      await db.executeQuery(compiled)
      const ms = performance.now() - t0
      const explain = dialect === 'sqlite' ? 'explain query plan' : 'explain'
      const { rows } = await db.executeQuery<Record<string, unknown>>(
        CompiledQuery.raw(`${explain} ${compiled.sql}`, [...compiled.parameters]),
      )
      const plan =
        dialect === 'sqlite'
          ? sqlitePlan(rows as { id: number; parent: number; detail: string }[])
          : rows.map((r) => String(r['QUERY PLAN']))
      const role = /limit \S+\) as e$/i.test(compiled.sql.trim())
        ? 'estimate'
        : /^select count\(\*\)/i.test(compiled.sql.trim())
          ? 'count'
          : 'page'
      statements.push({ role, ms, sql: compiled.sql, plan })
    }
    const text = statements.flatMap((st) => st.plan).join('\n')
    plans.push({
      key: q.key,
      statements,
      missing: usesOn(q, dialect).filter((name) => !text.includes(name)),
    })
  }
  return plans
}
