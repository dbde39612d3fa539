/**
 * The search part of `npm run bench`: for each N of BENCH_SEARCH_SIZES, a fresh Coffer child
 * whose one vault holds N documents under one schema (bench/search-data.ts writes them straight
 * to the database before the child listens), then each query of bench/search-queries.ts under
 * autocannon on POST /v1/vaults/{v}/search. Written to search.md in the results folder
 * (bench/out/, or bench/results/ with --save).
 */
import { envNumber, type Load, runScenario } from './load.js'
import type { SearchPlan, SearchServerInfo } from './protocol.js'
import { formatProblems, isBroken, type Measurement, markdownTable } from './report.js'
import type { Scenario } from './scenarios.js'
import {
  OWNED_EVERY,
  POPULATE,
  type SearchQueryDef,
  searchBody,
  searchQueries,
} from './search-queries.js'
import {
  formatStallLine,
  runStallScenario,
  type StallResult,
  stallDurationS,
  stallSection,
} from './search-stall.js'
import { startSearchServer } from './servers.js'

/** Sizes run by default; 1,000,000 is opt-in (it takes minutes to populate). */
export const DEFAULT_SEARCH_SIZES = [10_000, 100_000]
/** Starting a search child: migrations and the admin, then population at a pessimistic rate. */
const START_BASE_MS = 120_000
const START_MS_PER_DOCUMENT = 3

/**
 * Requests of one search run one after another on SQLite (and their statements interleave), so
 * each of C connections waits about C x the service time: the measurement must last a few of
 * those (else at 1M documents no request completes within 5 s). Duration = BENCH_DURATION, or
 * SLOW_ROUNDS x C x the single-request time when longer, at most BENCH_SEARCH_MAX_DURATION.
 */
const SLOW_ROUNDS = 3
const DEFAULT_MAX_DURATION_S = 60

/** BENCH_SEARCH_MAX_DURATION: the longest load for one query, in seconds. */
export function searchMaxDurationS(): number {
  return envNumber('BENCH_SEARCH_MAX_DURATION', DEFAULT_MAX_DURATION_S, false)
}

/**
 * BENCH_SEARCH_SECOND_VAULT: documents in a second vault of the same account beside the
 * measured one (`same`: as many as the measured vault; default 0, none), so that the account
 * and vault scoping of every index is exercised (issue 14: 1M beside 1M).
 */
export function searchSecondVault(documents: number): number {
  const raw = (process.env.BENCH_SEARCH_SECOND_VAULT ?? '').trim()
  if (raw === '') return 0
  if (raw === 'same') return documents
  const n = Number(raw.replace(/_/g, ''))
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new Error(`BENCH_SEARCH_SECOND_VAULT takes a count or "same" (got ${raw})`)
  }
  return n
}

/** BENCH_SEARCH_SIZES: comma-separated document counts (`_` allowed), ascending. */
export function searchSizes(): number[] {
  const raw = (process.env.BENCH_SEARCH_SIZES ?? '').trim()
  if (raw === '') return DEFAULT_SEARCH_SIZES
  const sizes = raw.split(',').map((part) => Number(part.trim().replace(/_/g, '')))
  if (sizes.some((n) => !Number.isSafeInteger(n) || n < 1)) {
    throw new Error(`BENCH_SEARCH_SIZES takes positive integers, comma-separated (got ${raw})`)
  }
  return [...new Set(sizes)].sort((a, b) => a - b)
}

export interface SearchQueryResult {
  def: SearchQueryDef
  m: Measurement
  /** The load actually applied (longer than asked for slow queries). */
  durationS: number
  /** One request alone on an idle server (the faster of two), in ms. */
  aloneMs?: number
  /** data.info.total_result_count and the page's length, from one request before the load. */
  total?: number
  returned?: number
}

export interface SearchSizeResult {
  documents: number
  /** Wall clock from spawning the child to its listening (population, checks, EXPLAINs). */
  startMs: number
  info?: SearchServerInfo
  queries: SearchQueryResult[]
  /** Why the child did not start, if it did not. */
  error?: string
  /** The "no stall" scenario (bench/search-stall.ts). */
  stall?: StallResult
}

/**
 * BENCH_SEARCH_SCENARIOS: `queries` (each query under load), `stall` (document reads while
 * searches run), comma-separated; default both.
 */
export function searchScenarios(): { queries: boolean; stall: boolean } {
  const raw = (process.env.BENCH_SEARCH_SCENARIOS ?? '').trim()
  if (raw === '') return { queries: true, stall: true }
  const parts = raw.split(',').map((p) => p.trim())
  for (const p of parts) {
    if (p !== 'queries' && p !== 'stall')
      throw new Error(`BENCH_SEARCH_SCENARIOS takes queries and stall (got ${raw})`)
  }
  return { queries: parts.includes('queries'), stall: parts.includes('stall') }
}

function basic(apiKey: string): string {
  return `Basic ${Buffer.from(`${apiKey}:`).toString('base64')}`
}

interface Probe {
  total?: number
  returned?: number
  ms: number
}

/** One request alone: its time, total_result_count and page length (undefined if it failed). */
async function probe(url: string, s: Scenario): Promise<Probe | undefined> {
  try {
    const t0 = performance.now()
    const res = await fetch(url, { method: 'POST', headers: s.headers, body: s.body as string })
    const json = (await res.json()) as {
      data?: { info?: { total_result_count?: number }; documents?: unknown[] }
    }
    const ms = performance.now() - t0
    if (res.status !== 200) return undefined
    const total = json.data?.info?.total_result_count
    const returned = json.data?.documents?.length
    return {
      ms,
      ...(total !== undefined ? { total } : {}),
      ...(returned !== undefined ? { returned } : {}),
    }
  } catch {
    return undefined
  }
}

/** The load for a query that takes `aloneMs` alone (see SLOW_ROUNDS). */
function loadFor(load: Load, aloneMs: number | undefined, maxDurationS: number): Load {
  if (aloneMs === undefined) return load
  const roundS = (load.connections * aloneMs) / 1000
  const durationS = Math.max(
    load.durationS,
    Math.min(maxDurationS, Math.ceil(SLOW_ROUNDS * roundS)),
  )
  // A response may wait for every other connection's request, twice over when unlucky.
  const timeoutS = Math.max(load.timeoutS ?? 10, Math.ceil(3 * roundS) + 5)
  return { ...load, durationS, timeoutS }
}

export async function runSearchBench(
  sizes: readonly number[],
  pgUrl: string | undefined,
  load: Load,
  warmupS: number,
  onResult: (size: number, q: SearchQueryResult) => void,
): Promise<SearchSizeResult[]> {
  const maxDurationS = searchMaxDurationS()
  const results: SearchSizeResult[] = []
  for (const documents of sizes) {
    process.stderr.write(`→ search: populating ${documents} documents\n`)
    const started = performance.now()
    let server: Awaited<ReturnType<typeof startSearchServer>>
    try {
      const beside = searchSecondVault(documents)
      server = await startSearchServer(
        documents,
        pgUrl,
        START_BASE_MS + START_MS_PER_DOCUMENT * (documents + beside),
        beside,
      )
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      process.stderr.write(`!!! search server with ${documents} documents: ${message}\n`)
      results.push({ documents, startMs: performance.now() - started, queries: [], error: message })
      continue
    }
    const result: SearchSizeResult = {
      documents,
      startMs: performance.now() - started,
      info: server.info,
      queries: [],
    }
    results.push(result)
    try {
      const { info } = server
      const p = info.population
      process.stderr.write(
        `  populated in ${(p.totalMs / 1000).toFixed(1)} s (seal ${(p.sealMs / 1000).toFixed(1)} s, insert ${(p.insertMs / 1000).toFixed(1)} s), ${mb(info.storage.totalBytes)}\n`,
      )
      const headersOf = (def: SearchQueryDef) => ({
        authorization: basic(def.caller === 'owner' ? info.ownerApiKey : info.adminApiKey),
        'content-type': 'application/x-www-form-urlencoded',
      })
      const scenarios = searchQueries(info.schemaId, info.controlName).map(
        (def): [SearchQueryDef, Scenario] => [
          def,
          {
            name: `search ${def.key} @ ${documents}`,
            server: 'coffer',
            method: 'POST',
            path: `/v1/vaults/${info.vaultId}/search`,
            headers: headersOf(def),
            body: searchBody(def.option),
          },
        ],
      )
      const url = `${server.url}/v1/vaults/${info.vaultId}/search`
      const which = searchScenarios()
      // Every query once first: the first measured one should not pay for a cold JIT.
      for (const [, scenario] of scenarios) await probe(url, scenario)
      for (const [def, scenario] of which.queries ? scenarios : []) {
        await server.settle()
        // The faster of two requests, each alone.
        const [a, b] = [await probe(url, scenario), await probe(url, scenario)]
        const probed = a && b ? (a.ms <= b.ms ? a : b) : undefined
        const queryLoad = loadFor(load, probed?.ms, maxDurationS)
        const m = await runScenario(server.url, scenario, queryLoad, warmupS, server.settle)
        const q: SearchQueryResult = {
          def,
          m,
          durationS: queryLoad.durationS,
          ...(probed
            ? {
                aloneMs: probed.ms,
                ...(probed.total !== undefined ? { total: probed.total } : {}),
                ...(probed.returned !== undefined ? { returned: probed.returned } : {}),
              }
            : {}),
        }
        result.queries.push(q)
        onResult(documents, q)
      }
      if (which.stall) {
        await server.settle()
        result.stall = await runStallScenario(server.url, info, stallDurationS())
        process.stdout.write(`${formatStallLine(documents, result.stall)}\n`)
      }
    } finally {
      await server.stop()
    }
  }
  return results
}

const fixed = (n: number | undefined, digits: number) =>
  n !== undefined && Number.isFinite(n) ? n.toFixed(digits) : '-'
const secs = (ms: number) => fixed(ms / 1000, 1)
const count = (n: number | undefined) => (n === undefined ? '-' : n.toLocaleString('en-US'))

function mb(bytes: number): string {
  return bytes >= 1e9 ? `${(bytes / 1e9).toFixed(2)} GB` : `${(bytes / 1e6).toFixed(1)} MB`
}

export function formatSearchLine(size: number, q: SearchQueryResult): string {
  const { m } = q
  return [
    `search ${q.def.key.padEnd(8)} N=${String(size).padEnd(8)}`,
    `matches ${count(q.total).padStart(9)}`,
    `alone ${fixed(q.aloneMs, 1).padStart(7)} ms`,
    `${fixed(m.reqPerSec, 1).padStart(8)} req/s`,
    `p50 ${fixed(m.p50Ms, 2).padStart(8)} ms`,
    `p99 ${fixed(m.p99Ms, 2).padStart(8)} ms`,
    `${m.requests} requests in ${q.durationS} s`,
    `non-2xx ${m.non2xx}`,
    `errors ${m.errors}`,
  ].join('  ')
}

/** Failed: a child that did not start, a broken load, or a plan that lost one of its indexes. */
export function searchBroken(results: readonly SearchSizeResult[]): string[] {
  return results.flatMap((r) => [
    ...(r.error !== undefined ? [`search @ ${r.documents} (${r.error})`] : []),
    ...r.queries.filter((q) => isBroken(q.m)).map((q) => q.m.scenario.name),
    ...(r.info?.plans ?? [])
      .filter((p) => p.missing.length > 0)
      .map((p) => `search ${p.key} @ ${r.documents}: plan no longer uses ${p.missing.join(', ')}`),
  ])
}

export interface SearchRunInfo {
  date: Date
  durationS: number
  warmupS: number
  connections: number
  database: string
  node: string
  cpus: number
  maxDurationS: number
}

function populationTable(results: readonly SearchSizeResult[]): string[] {
  const sizeOf = (r: SearchSizeResult, name: string) =>
    r.info?.storage.objects
      .filter((o) => o.name === name || o.name.startsWith(`${name}_`))
      .reduce((s, o) => s + o.bytes, 0)
  return markdownTable(
    [
      'documents',
      'index rows',
      'generate s',
      'seal s',
      'insert s',
      'finish s',
      'populate s',
      'docs/s',
      'child start s',
      'database size',
      'search_index + its indexes',
      'documents + its indexes',
    ],
    [true, true, true, true, true, true, true, true, true, true, true, true],
    results.map((r) => {
      const p = r.info?.population
      if (!p || !r.info)
        return [count(r.documents), '-', '-', '-', '-', '-', '-', '-', '-', '-', '-', '-']
      const si = sizeOf(r, 'search_index')
      const docs = sizeOf(r, 'documents')
      return [
        count(r.documents),
        count(p.indexRows),
        secs(p.generateMs),
        secs(p.sealMs),
        secs(p.insertMs),
        secs(p.finishMs),
        secs(p.totalMs),
        count(Math.round(p.documents / (p.totalMs / 1000))),
        secs(r.startMs),
        mb(r.info.storage.totalBytes),
        si ? mb(si) : '-',
        docs ? mb(docs) : '-',
      ]
    }),
  )
}

function resultsTable(results: readonly SearchSizeResult[]): string[] {
  const rows: string[][] = []
  const keys = results.find((r) => r.queries.length > 0)?.queries.map((q) => q.def) ?? []
  for (const def of keys) {
    for (const r of results) {
      const q = r.queries.find((x) => x.def.key === def.key)
      const plan = r.info?.plans.find((p) => p.key === def.key)
      const ms = (role: 'estimate' | 'count' | 'page') => {
        const timed = plan?.statements.filter((s) => s.role === role) ?? []
        return timed.length === 0
          ? '-'
          : fixed(
              timed.reduce((sum, s) => sum + s.ms, 0),
              1,
            )
      }
      rows.push([
        def.label,
        count(r.documents),
        count(q?.total),
        fixed(q?.aloneMs, 1),
        q ? fixed(q.m.reqPerSec, 1) : '-',
        q ? fixed(q.m.p50Ms, 2) : '-',
        q ? fixed(q.m.p99Ms, 2) : '-',
        ms('estimate'),
        ms('count'),
        ms('page'),
        q ? `${count(q.m.requests)} in ${q.durationS} s` : '-',
        q ? `${q.m.non2xx}${isBroken(q.m) ? ' **BROKEN**' : ''}` : '-',
        plan ? (plan.missing.length > 0 ? `**LOST ${plan.missing.join(', ')}**` : 'ok') : '-',
      ])
    }
  }
  return markdownTable(
    [
      'query',
      'N',
      'matches',
      'alone ms',
      'req/s',
      'p50 ms',
      'p99 ms',
      'estimate SQL ms',
      'count SQL ms',
      'page SQL ms',
      'measured',
      'non-2xx',
      'plan',
    ],
    [false, true, true, true, true, true, true, true, true, true, true, true, false],
    rows,
  )
}

function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b <= 0)
    return '-'
  const r = a / b
  return `${r >= 10 ? r.toFixed(0) : r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}x`
}

/** From the smallest to the largest N that ran: req/s and p50 ratios (and the matches'). */
function growthTable(results: readonly SearchSizeResult[]): string[] {
  const ran = results.filter((r) => r.queries.length > 0)
  const small = ran[0]
  const large = ran[ran.length - 1]
  if (!small || !large || small === large) return []
  const s = count(small.documents)
  const l = count(large.documents)
  const rows = small.queries.map((qs) => {
    const ql = large.queries.find((x) => x.def.key === qs.def.key)
    return [
      qs.def.label,
      ratio(ql?.total, qs.total),
      fixed(qs.m.reqPerSec, 1),
      fixed(ql?.m.reqPerSec, 1),
      ratio(ql?.m.reqPerSec, qs.m.reqPerSec),
      fixed(qs.m.p50Ms, 2),
      fixed(ql?.m.p50Ms, 2),
      ratio(ql?.m.p50Ms, qs.m.p50Ms),
      fixed(qs.aloneMs, 1),
      fixed(ql?.aloneMs, 1),
      ratio(ql?.aloneMs, qs.aloneMs),
    ]
  })
  return [
    `## Growth from ${s} to ${l} documents (${ratio(large.documents, small.documents)} the data)`,
    '',
    'A query that stays flat has req/s, p50 and alone ratios near 1x; one whose cost follows its matches has the p50 and alone ratios near the matches ratio (and the req/s ratio near its inverse).',
    '',
    ...markdownTable(
      [
        'query',
        'matches ratio',
        `req/s ${s}`,
        `req/s ${l}`,
        'req/s ratio',
        `p50 ms ${s}`,
        `p50 ms ${l}`,
        'p50 ratio',
        `alone ms ${s}`,
        `alone ms ${l}`,
        'alone ratio',
      ],
      [false, true, true, true, true, true, true, true, true, true, true],
      rows,
    ),
    '',
  ]
}

function storageSection(results: readonly SearchSizeResult[]): string[] {
  const large = results.filter((r) => r.info).at(-1)
  if (!large?.info) return []
  const { storage, population } = large.info
  const perRow = (bytes: number) => (bytes / population.indexRows).toFixed(0)
  return [
    `## Storage at ${count(large.documents)} documents`,
    '',
    ...markdownTable(
      ['table or index', 'size', 'bytes per index row'],
      [false, true, true],
      storage.objects
        .filter((o) => o.bytes >= 1e6)
        .map((o) => [
          o.name,
          mb(o.bytes),
          o.name.startsWith('search_index') || o.name.startsWith('sqlite_autoindex_search_index')
            ? perRow(o.bytes)
            : '',
        ]),
    ),
    '',
  ]
}

function plansSection(results: readonly SearchSizeResult[]): string[] {
  const ran = results.filter((r) => r.info)
  const large = ran[ran.length - 1]
  if (!large?.info) return []
  const same = (a: SearchPlan | undefined, b: SearchPlan | undefined) =>
    JSON.stringify(a?.statements.map((s) => s.plan)) ===
    JSON.stringify(b?.statements.map((s) => s.plan))
  const lines = [
    `## Query plans at ${count(large.documents)} documents`,
    '',
    `Each search runs its bounded estimates (which candidate set drives; absent when there is no choice), the total, then one page (src/modules/search/search.repo.ts). Captured from the app's own repository code (searchDocuments, admin scopes or the owner's), each timed once on its own and explained (${large.info.dialect === 'sqlite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN'}). Each query names the indexes its plans must use (bench/search-queries.ts, \`uses\`); a plan without one fails the run.`,
    '',
  ]
  for (const plan of large.info.plans) {
    const differs = ran
      .filter(
        (r) =>
          r !== large &&
          !same(
            r.info?.plans.find((p) => p.key === plan.key),
            plan,
          ),
      )
      .map((r) => count(r.documents))
    const lost = plan.missing.length > 0 ? ` — **LOST ${plan.missing.join(', ')}**` : ''
    lines.push(
      `### ${plan.key}${differs.length ? ` (plan differs at ${differs.join(', ')})` : ''}${lost}`,
      '',
    )
    for (const st of plan.statements) {
      lines.push(`${st.role} (${st.ms.toFixed(1)} ms):`, '', '```', ...st.plan, '```', '')
    }
  }
  const sample = large.info.plans.find((p) => p.key === 'and')?.statements
  if (sample?.length) {
    lines.push(
      '### SQL of the `and` query',
      '',
      '```sql',
      ...sample.map((s) => `-- ${s.role}\n${s.sql}`),
      '```',
      '',
    )
  }
  return lines
}

export function searchMarkdown(run: SearchRunInfo, results: readonly SearchSizeResult[]): string {
  const broken = results.flatMap((r) => [
    ...(r.error !== undefined ? [`!!! search @ ${r.documents}: ${r.error}`] : []),
    ...r.queries.filter((q) => isBroken(q.m)).map((q) => formatProblems(q.m)),
  ])
  const first = results.find((r) => r.info)?.info
  return [
    '# Coffer bench: search',
    '',
    `${run.date.toISOString()}, Node ${run.node}, ${run.cpus} CPUs, database ${run.database}.`,
    `Each query: ${run.warmupS} s warm-up, then ${run.durationS} s with ${run.connections} connections (autocannon, 127.0.0.1, server in a child process), POST /v1/vaults/{v}/search with the admin API key (the \`owner\` query: the owner-scoped user's), \`search_option\` as base64 JSON in a form field, per_page 100, full_document false (nothing is decrypted).`,
    'Numbers from a shared machine are noisy; compare within one run.',
    '',
    '## Data',
    '',
    `One vault, one schema${first?.secondVaultDocuments ? ` (and a second vault of ${count(first.secondVaultDocuments)} documents under its own schema beside it, BENCH_SEARCH_SECOND_VAULT)` : ''}: \`status\` (string, 10 values, uniform), \`age\` (integer 0-99), \`name\` (two words of 4-9 random lowercase letters), \`tags\` (1-3 of 20 strings), \`joined\` (date, 2010-2025), \`loc\` (geo_point, uniform in a 300 km x 300 km box). Generated from a fixed seed. Every ${OWNED_EVERY}th document is owned by the owner-scoped user (its group: R on the vault's Search and on \`Document::$[Owner=self]\`).`,
    `Written straight to the database by the server child before it listens: the vault and schema through the API; each document's content sealed with the real keyring (AES-256-GCM, bound to its vault and id, one encryption per document, as the documents service does); its index rows from \`indexValues\` over the schema's stored fields; batched multi-row INSERTs (${count(POPULATE.documentRowsPerInsert)} documents or ${count(POPULATE.indexRowsPerInsert)} index rows per statement, compiled by Kysely), one transaction per ${count(POPULATE.docsPerTransaction)} documents. Two documents per N are then checked through the API: read back (decrypted) and re-indexed (POST …/reindex leaves their index rows unchanged).`,
    first?.dialect === 'sqlite'
      ? `SQLite: the page cache is raised to ${POPULATE.sqliteCacheMiB} MiB while populating only and restored (better-sqlite3’s default, 16 MB) for the measurements; the WAL is checkpointed (TRUNCATE) after. No ANALYZE: the app never runs it. Database size = file + WAL; the per-table sizes come from dbstat.`
      : 'PostgreSQL: VACUUM ANALYZE after populating (autovacuum would soon do the same); sizes are pg_table_size / pg_relation_size of the schema’s tables and indexes.',
    '',
    ...populationTable(results),
    '',
    'generate = documents and index rows in JavaScript; seal = keyring encryption; insert = the INSERTs and commits; finish = checkpoint or VACUUM ANALYZE; populate = all of these; child start = spawn to listening (also the API checks and the EXPLAINs).',
    '',
    '## Results',
    '',
    `matches = data.info.total_result_count; alone ms = one request on an idle server (the faster of two, after one round of every query); estimate / count / page SQL ms = the statements of one search (estimates summed), each timed once in the child before the load; plan = whether every index the query must use is in its plans; measured = completed requests and the load's length (BENCH_DURATION, or ${SLOW_ROUNDS} x connections x alone ms for slow queries, at most BENCH_SEARCH_MAX_DURATION = ${run.maxDurationS} s: with ${run.connections} connections on one SQLite connection each request waits for the others, so at 1M documents no request would finish within 5 s). The server is idle (its CPU, and on PostgreSQL its sessions) before each pre-flight and after each warm-up.`,
    '',
    ...resultsTable(results),
    '',
    ...growthTable(results),
    ...stallSection(results),
    ...storageSection(results),
    ...plansSection(results),
    ...(broken.length ? ['```', ...broken, '```', ''] : []),
  ].join('\n')
}
