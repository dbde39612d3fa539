/**
 * The "no stall" scenario of the search bench (issue 14, point 2): one client reads a document
 * over and over, first alone (idle), then while 4 other clients run a broad search without
 * pause. Its p99 under the searches should stay within 3x its idle p99: on SQLite searches run
 * on worker threads, on PostgreSQL they are capped below the pool size.
 */
import { envNumber } from './load.js'
import type { SearchServerInfo } from './protocol.js'
import { searchBody, searchQueries } from './search-queries.js'

/** Clients searching without pause during the busy phase. */
export const STALL_SEARCH_CLIENTS = 4
/** The broad query they run (status = active: 10% of the vault). */
export const STALL_QUERY_KEY = 'eq'

export interface StallResult {
  durationS: number
  idle: { p50Ms: number; p99Ms: number; reads: number }
  busy: { p50Ms: number; p99Ms: number; reads: number }
  /** Searches answered during the busy phase, by status code. */
  searches: Record<string, number>
  /** Read answers other than 200, both phases. */
  readFailures: number
}

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number)

/** BENCH_STALL_DURATION: seconds of each phase (default 15). */
export function stallDurationS(): number {
  return envNumber('BENCH_STALL_DURATION', 15, true)
}

export async function runStallScenario(
  baseUrl: string,
  info: SearchServerInfo,
  durationS: number,
): Promise<StallResult> {
  const auth = `Basic ${Buffer.from(`${info.adminApiKey}:`).toString('base64')}`
  const form = { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' }
  const queries = searchQueries(info.schemaId, info.controlName)
  const control = queries.find((q) => q.key === 'control')
  const broad = queries.find((q) => q.key === STALL_QUERY_KEY)
  if (!control || !broad) throw new Error('stall scenario: control or broad query missing')
  const searchUrl = `${baseUrl}/v1/vaults/${info.vaultId}/search`
  const found = await fetch(searchUrl, {
    method: 'POST',
    headers: form,
    body: searchBody(control.option),
  })
  const docId = ((await found.json()) as { data: { documents: { document_id: string }[] } }).data
    .documents[0]?.document_id
  if (!docId) throw new Error('stall scenario: the control document was not found')
  const readUrl = `${baseUrl}/v1/vaults/${info.vaultId}/documents/${docId}`
  let readFailures = 0

  const readFor = async (ms: number) => {
    const latencies: number[] = []
    const end = performance.now() + ms
    while (performance.now() < end) {
      const started = performance.now()
      const res = await fetch(readUrl, { headers: { authorization: auth } })
      await res.arrayBuffer()
      latencies.push(performance.now() - started)
      if (res.status !== 200) readFailures++
    }
    latencies.sort((a, b) => a - b)
    return {
      p50Ms: percentile(latencies, 0.5),
      p99Ms: percentile(latencies, 0.99),
      reads: latencies.length,
    }
  }

  await readFor(1000) // warm-up
  const idle = await readFor(durationS * 1000)

  const searches: Record<string, number> = {}
  let searching = true
  const body = searchBody(broad.option)
  const searcher = async () => {
    while (searching) {
      const res = await fetch(searchUrl, { method: 'POST', headers: form, body })
      await res.arrayBuffer()
      searches[res.status] = (searches[res.status] ?? 0) + 1
    }
  }
  const clients = Array.from({ length: STALL_SEARCH_CLIENTS }, searcher)
  await new Promise((r) => setTimeout(r, 1000))
  for (const k of Object.keys(searches)) delete searches[k]
  const busy = await readFor(durationS * 1000)
  searching = false
  await Promise.all(clients)
  return { durationS, idle, busy, searches, readFailures }
}

const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-')

/** One line for the console. */
export function formatStallLine(size: number, r: StallResult): string {
  const ratio = r.busy.p99Ms / r.idle.p99Ms
  return `no stall @ ${size}: read p99 idle ${ms(r.idle.p99Ms)} ms, under ${STALL_SEARCH_CLIENTS} searching clients ${ms(r.busy.p99Ms)} ms (${ratio.toFixed(2)}x; target ≤ 3x), searches ${JSON.stringify(r.searches)}`
}

/** The markdown section: one row per size. */
export function stallSection(
  rows: readonly { documents: number; stall?: StallResult }[],
): string[] {
  const measured = rows.filter((r) => r.stall)
  if (measured.length === 0) return []
  const lines = [
    '## No stall: document reads while searches run',
    '',
    `One client reads one document in a loop, alone (idle), then while ${STALL_SEARCH_CLIENTS} clients run the broad query \`${STALL_QUERY_KEY}\` without pause. Target: busy p99 within 3x of idle p99.`,
    '',
    '| documents | phase (s) | idle p50 / p99 (ms) | busy p50 / p99 (ms) | p99 ratio | reads idle / busy | searches answered (by status) | read failures |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |',
  ]
  for (const { documents, stall } of measured) {
    const r = stall as StallResult
    lines.push(
      `| ${documents.toLocaleString('en-US')} | ${r.durationS} | ${ms(r.idle.p50Ms)} / ${ms(r.idle.p99Ms)} | ${ms(r.busy.p50Ms)} / ${ms(r.busy.p99Ms)} | ${(r.busy.p99Ms / r.idle.p99Ms).toFixed(2)}x | ${r.idle.reads} / ${r.busy.reads} | ${Object.entries(
        r.searches,
      )
        .map(([s, n]) => `${s}: ${n}`)
        .join(', ')} | ${r.readFailures} |`,
    )
  }
  lines.push('')
  return lines
}
