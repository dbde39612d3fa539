/** Formats results: one line per scenario as it finishes, and a Markdown table at the end. */
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { type BlobMeasurement, MiB, mib } from './blobs.js'
import type { Scenario } from './scenarios.js'

/** The RSS growth a 50 MiB upload should stay under: the server streams, it does not buffer. */
export const RSS_GROWTH_TARGET = 32 * MiB

export interface Measurement {
  scenario: Scenario
  /** Mean of the per-second request counts. */
  reqPerSec: number
  p50Ms: number
  p99Ms: number
  requests: number
  non2xx: number
  /** Connection errors, timeouts included. */
  errors: number
  timeouts: number
  statusCodes: Record<string, number>
  /** A problem seen by the single pre-flight request (status and body), if any. */
  preflightProblem?: string
}

export interface RunInfo {
  date: Date
  durationS: number
  warmupS: number
  connections: number
  database: string
  node: string
  cpus: number
  /** The BLOB part: rounds per store and bytes per BLOB. */
  blobRounds: number
  blobBytes: number
}

export function isBroken(m: Measurement): boolean {
  return m.non2xx > 0 || m.errors > 0 || m.preflightProblem !== undefined
}

const fixed = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : '-')

function ratio(m: Measurement, bare: number | undefined): string {
  if (!bare || bare <= 0 || !Number.isFinite(m.reqPerSec)) return '-'
  const r = m.reqPerSec / bare
  // Two significant digits however small: login is a fraction of a percent of bare.
  return `${r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}x`
}

export function formatLine(m: Measurement, bare: number | undefined): string {
  return [
    m.scenario.name.padEnd(51),
    `${fixed(m.reqPerSec, 1).padStart(9)} req/s`,
    `p50 ${fixed(m.p50Ms, 2).padStart(7)} ms`,
    `p99 ${fixed(m.p99Ms, 2).padStart(7)} ms`,
    `ratio ${ratio(m, bare).padStart(7)}`,
    `non-2xx ${m.non2xx}`,
    `errors ${m.errors}`,
  ].join('  ')
}

/** A loud, multi-line complaint for a scenario whose numbers cannot be trusted. */
export function formatProblems(m: Measurement): string {
  const lines = [`!!! BROKEN SCENARIO: ${m.scenario.name} — its numbers measure failures, not work`]
  if (m.preflightProblem) lines.push(`!!!   pre-flight request: ${m.preflightProblem}`)
  if (m.non2xx > 0) {
    const codes = Object.entries(m.statusCodes)
      .map(([code, count]) => `${code}: ${count}`)
      .join(', ')
    lines.push(`!!!   ${m.non2xx} non-2xx of ${m.requests} responses (status codes ${codes})`)
  }
  if (m.errors > 0) lines.push(`!!!   ${m.errors} connection errors (${m.timeouts} timeouts)`)
  return lines.join('\n')
}

/** A Markdown table padded the way `biome format` lays tables out (it checks this file). */
export function markdownTable(
  header: string[],
  rightAligned: boolean[],
  rows: string[][],
): string[] {
  const widths = header.map((h, i) =>
    Math.max(3, h.length, ...rows.map((r) => (r[i] ?? '').length)),
  )
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (rightAligned[i] ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join(' | ')} |`
  const rule = widths.map((w, i) => (rightAligned[i] ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w)))
  return [line(header), `| ${rule.join(' | ')} |`, ...rows.map(line)]
}

export function isBlobBroken(b: BlobMeasurement): boolean {
  return b.problems.length > 0 || !b.verified
}

const growthOf = (b: BlobMeasurement) => b.rssPeak - b.rssBefore

/**
 * The largest growth of one upload after the first, from the RSS right before it: what each
 * further upload needs once the first has paid the one-time costs (the multipart path's code,
 * the S3 store's reused part buffers, the heap's first growth). NaN with a single round.
 */
export function laterGrowthOf(b: BlobMeasurement): number {
  const growths = b.uploadPeaks
    .slice(1)
    .map((peak, i) => peak - (b.uploadBefore[i + 1] ?? Number.NaN))
  return growths.length > 0 ? Math.max(...growths) : Number.NaN
}

export function formatBlobLine(b: BlobMeasurement): string {
  const growth = growthOf(b)
  return [
    `BLOB ${b.store} (${mib(b.sizeBytes)} x ${b.rounds})`.padEnd(30),
    `upload ${fixed(b.uploadMBps, 1).padStart(6)} MB/s`,
    `download ${fixed(b.downloadMBps, 1).padStart(6)} MB/s`,
    `RSS before ${mib(b.rssBefore)}, peak ${mib(b.rssPeak)}, growth ${mib(growth)}${growth >= RSS_GROWTH_TARGET ? ' (OVER TARGET)' : ''}, later uploads ${mib(laterGrowthOf(b))}`,
    `SHA-256 ${b.verified ? 'ok' : 'MISMATCH'}`,
  ].join('  ')
}

export function formatBlobProblems(b: BlobMeasurement): string {
  return [
    `!!! BROKEN BLOB MEASUREMENT (${b.store}) — its numbers cannot be trusted`,
    ...b.problems.map((p) => `!!!   ${p}`),
  ].join('\n')
}

function blobTable(blobs: BlobMeasurement[]): string[] {
  return markdownTable(
    [
      'store',
      'upload MB/s',
      'download MB/s',
      'RSS before',
      'RSS peak',
      'RSS growth',
      'later uploads',
      'SHA-256',
    ],
    [false, true, true, true, true, true, true, false],
    blobs.map((b) => {
      const growth = growthOf(b)
      const over = growth >= RSS_GROWTH_TARGET ? ' **over target**' : ''
      return [
        b.store,
        fixed(b.uploadMBps, 1),
        fixed(b.downloadMBps, 1),
        mib(b.rssBefore),
        mib(b.rssPeak),
        `${mib(growth)}${over}`,
        mib(laterGrowthOf(b)),
        `${b.verified ? 'ok' : 'MISMATCH'}${isBlobBroken(b) ? ' **BROKEN**' : ''}`,
      ]
    }),
  )
}

function blobIntro(run: RunInfo): string[] {
  return [
    `Each store: one 1 MiB warm-up, then ${run.blobRounds} uploads of ${mib(run.blobBytes)} of generated bytes (multipart, streamed over a fresh socket each), then ${run.blobRounds} downloads, each checked by SHA-256; MB/s = 10^6 bytes/s, median of the rounds.`,
    `RSS is the server child's (/proc/<pid>/status): before = just before the first upload; peak = the highest of 50 ms VmRSS samples and VmHWM (reset before each request) during the uploads; growth = peak - before, target < ${mib(RSS_GROWTH_TARGET)}; later uploads = the largest growth of one upload after the first, from the RSS right before it (the first pays once for what every later one reuses).`,
  ]
}

function blobDetails(blobs: BlobMeasurement[]): string[] {
  const lines: string[] = []
  for (const b of blobs) {
    if (!Number.isFinite(b.rssPeak)) continue
    const secs = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(', ')
    lines.push(
      `- ${b.store}: uploads took ${secs(b.uploadSeconds)} s (RSS peaks ${b.uploadPeaks.map(mib).join(', ')}); downloads took ${secs(b.downloadSeconds)} s (RSS ${mib(b.rssBeforeDownload)} before them, peak ${mib(b.rssPeakDownload)}); ${b.samples} RSS samples, longest gap ${b.maxSampleGapMs.toFixed(0)} ms.`,
    )
  }
  return lines
}

export function markdown(run: RunInfo, results: Measurement[], blobs: BlobMeasurement[]): string {
  const bare = results.find((m) => m.scenario.server === 'bare')?.reqPerSec
  const tableLines = markdownTable(
    ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'ratio to bare', 'non-2xx'],
    [false, true, true, true, true, true],
    results.map((m) => [
      m.scenario.name,
      fixed(m.reqPerSec, 1),
      fixed(m.p50Ms, 2),
      fixed(m.p99Ms, 2),
      ratio(m, bare),
      `${m.non2xx}${isBroken(m) ? ' **BROKEN**' : ''}`,
    ]),
  )
  const notes = results
    .filter((m) => m.scenario.note)
    .map((m) => `- ${m.scenario.name}: ${m.scenario.note}`)
  const broken = [
    ...results.filter(isBroken).map((m) => formatProblems(m)),
    ...blobs.filter(isBlobBroken).map((b) => formatBlobProblems(b)),
  ]
  return [
    '# Coffer bench: latest results',
    '',
    `${run.date.toISOString()}, Node ${run.node}, ${run.cpus} CPUs, database ${run.database}.`,
    `Each scenario: ${run.warmupS} s warm-up, then ${run.durationS} s with ${run.connections} connections (autocannon, 127.0.0.1, server in a child process).`,
    'Numbers from a shared machine are noisy; compare ratios within one run, not across runs.',
    '',
    ...tableLines,
    ...(notes.length ? ['', ...notes] : []),
    ...(blobs.length
      ? ['', '## BLOBs', '', ...blobIntro(run), '', ...blobTable(blobs), '', ...blobDetails(blobs)]
      : []),
    ...(broken.length ? ['', '```', ...broken, '```'] : []),
    '',
  ].join('\n')
}

export function writeReport(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, text)
}
