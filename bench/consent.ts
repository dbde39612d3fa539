/**
 * The consent part of `npm run bench`: the consent API (its own Fastify app, as `coffer serve`
 * runs it) against the bare Fastify baseline, both in child processes of this run. Rounds
 * interleave bare, GET of an existing record and POST update, so drift on a shared machine
 * hits all three alike; the report gives each scenario's median over the rounds and the ratio
 * of medians to bare. Written to consent.md (consent-postgres.md on PostgreSQL) in the results folder
 * (bench/out/, or bench/results/ with --save: bench/results-dir.ts).
 */
import { envNumber, type Load, runScenario } from './load.js'
import type { ConsentServerInfo } from './protocol.js'
import { formatProblems, isBroken, type Measurement, markdownTable } from './report.js'
import { bareScenario, type Scenario } from './scenarios.js'
import { startBareServer, startConsentServer } from './servers.js'

export interface ConsentScenarioResult {
  scenario: Scenario
  rounds: Measurement[]
  medianReqPerSec: number
  medianP50Ms: number
  medianP99Ms: number
}

export interface ConsentRunInfo {
  date: Date
  durationS: number
  warmupS: number
  connections: number
  rounds: number
  database: string
  node: string
  cpus: number
}

/** BENCH_CONSENT_ROUNDS: measurements of each scenario (default 3). */
export function consentRounds(): number {
  return envNumber('BENCH_CONSENT_ROUNDS', 3, true)
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

function consentScenarios(info: ConsentServerInfo): Scenario[] {
  let next = 0
  return [
    {
      name: 'consent GET (existing record)',
      server: 'coffer',
      method: 'GET',
      path: info.readPath,
      headers: { 'user-agent': 'coffer-bench' },
      note: 'one primary-key read, a keyed digest of the email and a freshly signed HS256 token',
    },
    {
      name: 'consent POST (update)',
      server: 'coffer',
      method: 'POST',
      path: '/api/v1/cmp/consent',
      headers: { 'content-type': 'application/json', 'user-agent': 'coffer-bench' },
      // Round-robin over the fixture's consumers, as real traffic is spread over many records.
      body: () =>
        JSON.stringify({
          jwt: info.jwts[next++ % info.jwts.length],
          consentAnalytics: next % 2 === 0,
          optedOut: false,
        }),
      note: `token verified, then one transaction: locked read, update and a history row; round-robin over ${info.jwts.length} consumers`,
    },
  ]
}

export async function runConsentBench(
  pgUrl: string | undefined,
  load: Load,
  warmupS: number,
  rounds: number,
  onResult: (m: Measurement, bare: number | undefined) => void,
): Promise<ConsentScenarioResult[]> {
  const bare = await startBareServer()
  try {
    const consent = await startConsentServer(pgUrl)
    try {
      const runs: [string, Scenario][] = [
        [bare.url, bareScenario],
        ...consentScenarios(consent.info).map((s): [string, Scenario] => [consent.url, s]),
      ]
      const results: ConsentScenarioResult[] = runs.map(([, scenario]) => ({
        scenario,
        rounds: [],
        medianReqPerSec: Number.NaN,
        medianP50Ms: Number.NaN,
        medianP99Ms: Number.NaN,
      }))
      for (let round = 1; round <= rounds; round++) {
        process.stderr.write(`→ consent: round ${round} of ${rounds}\n`)
        let bareRate: number | undefined
        for (const [i, [url, scenario]] of runs.entries()) {
          const m = await runScenario(url, scenario, load, warmupS)
          if (i === 0) bareRate = m.reqPerSec
          ;(results[i] as ConsentScenarioResult).rounds.push(m)
          onResult(m, bareRate)
        }
      }
      for (const r of results) {
        r.medianReqPerSec = median(r.rounds.map((m) => m.reqPerSec))
        r.medianP50Ms = median(r.rounds.map((m) => m.p50Ms))
        r.medianP99Ms = median(r.rounds.map((m) => m.p99Ms))
      }
      return results
    } finally {
      await consent.stop()
    }
  } finally {
    await bare.stop()
  }
}

export function consentBroken(results: readonly ConsentScenarioResult[]): string[] {
  return results.filter((r) => r.rounds.some(isBroken)).map((r) => r.scenario.name)
}

const fixed = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : '-')

function ratio(value: number, bare: number): string {
  if (!Number.isFinite(value) || !Number.isFinite(bare) || bare <= 0) return '-'
  const r = value / bare
  return `${r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}x`
}

/** One line per scenario for the run's summary. */
export function consentLines(results: readonly ConsentScenarioResult[]): string[] {
  const bare = results[0]?.medianReqPerSec ?? Number.NaN
  return results.map(
    (r) =>
      `${r.scenario.name.padEnd(32)} median ${fixed(r.medianReqPerSec, 1).padStart(9)} req/s  p50 ${fixed(r.medianP50Ms, 2)} ms  p99 ${fixed(r.medianP99Ms, 2)} ms  ratio ${ratio(r.medianReqPerSec, bare)}`,
  )
}

export function consentMarkdown(
  run: ConsentRunInfo,
  results: readonly ConsentScenarioResult[],
): string {
  const bare = results[0]?.medianReqPerSec ?? Number.NaN
  const table = markdownTable(
    [
      'scenario',
      'median req/s',
      'rounds req/s',
      'median p50 ms',
      'median p99 ms',
      'ratio to bare',
      'non-2xx',
    ],
    [false, true, true, true, true, true, true],
    results.map((r) => [
      r.scenario.name,
      fixed(r.medianReqPerSec, 1),
      r.rounds.map((m) => fixed(m.reqPerSec, 0)).join(' / '),
      fixed(r.medianP50Ms, 2),
      fixed(r.medianP99Ms, 2),
      ratio(r.medianReqPerSec, bare),
      `${r.rounds.reduce((n, m) => n + m.non2xx, 0)}${r.rounds.some(isBroken) ? ' **BROKEN**' : ''}`,
    ]),
  )
  const notes = results
    .filter((r) => r.scenario.note)
    .map((r) => `- ${r.scenario.name}: ${r.scenario.note}`)
  const broken = results.flatMap((r) => r.rounds.filter(isBroken).map(formatProblems))
  return [
    '# Coffer bench: consent API',
    '',
    `${run.date.toISOString()}, Node ${run.node}, ${run.cpus} CPUs, database ${run.database}.`,
    `${run.rounds} rounds, each: bare, then GET, then POST; every measurement ${run.warmupS} s warm-up, then ${run.durationS} s with ${run.connections} connections (autocannon, 127.0.0.1, servers in child processes).`,
    'Medians over the rounds; ratio = median req/s / median req/s of bare GET / (bare Fastify, same machine, same run).',
    '',
    ...table,
    ...(notes.length ? ['', ...notes] : []),
    ...(broken.length ? ['', '```', ...broken, '```'] : []),
    '',
  ].join('\n')
}
