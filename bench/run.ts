/**
 * `npm run bench`: HTTP throughput and latency of Coffer against a bare Fastify baseline.
 *
 * Env: BENCH_DURATION (seconds per scenario, default 5), BENCH_CONNECTIONS (default 10),
 * BENCH_WARMUP (seconds, default 1), COFFER_BENCH_DATABASE_URL (postgres://…: run Coffer on
 * PostgreSQL in a fresh schema, dropped afterwards; default a fresh SQLite file in a temp dir).
 * Writes bench/results/latest.md; exits 1 if any scenario saw non-2xx responses or errors.
 */
import { cpus } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import {
  formatLine,
  formatProblems,
  isBroken,
  type Measurement,
  markdown,
  type RunInfo,
  writeReport,
} from './report.js'
import { bareScenario, cofferScenarios, type Scenario } from './scenarios.js'
import { startBareServer, startCofferServer, stopAll } from './servers.js'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const RESULTS_FILE = join(BENCH_DIR, 'results', 'latest.md')

function envNumber(name: string, fallback: number, integer: boolean): number {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new Error(`${name} must be a positive ${integer ? 'integer' : 'number'} (got ${raw})`)
  }
  return value
}

function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return 'postgres://(unparseable URL)'
  }
}

interface Load {
  durationS: number
  connections: number
}

interface Fired {
  result: autocannon.Result
  /** Every response time in ms, at full precision (autocannon's histogram keeps whole ms). */
  latenciesMs: Float64Array
}

function fire(baseUrl: string, scenario: Scenario, load: Load): Promise<Fired> {
  const { body } = scenario
  const options: autocannon.Options = {
    url: `${baseUrl}${scenario.path}`,
    method: scenario.method,
    headers: scenario.headers,
    duration: load.durationS,
    connections: load.connections,
    timeout: 10,
    ...(typeof body === 'string' ? { body } : {}),
    ...(typeof body === 'function'
      ? { requests: [{ setupRequest: (request) => ({ ...request, body: body() }) }] }
      : {}),
  }
  const latencies: number[] = []
  return new Promise((resolve, reject) => {
    const instance = autocannon(options, (error, result) =>
      error ? reject(error) : resolve({ result, latenciesMs: Float64Array.from(latencies) }),
    )
    instance.on('response', (_client, _status, _bytes, responseTime) => {
      latencies.push(responseTime)
    })
  })
}

/** Nearest-rank percentile (q in 0..1) of sorted samples; NaN when there are none. */
function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)))
  return sorted[rank - 1] as number
}

/** One request before the load: a broken scenario shows its status and body, not just a count. */
async function preflight(baseUrl: string, scenario: Scenario): Promise<string | undefined> {
  const body = typeof scenario.body === 'function' ? scenario.body() : scenario.body
  try {
    const res = await fetch(`${baseUrl}${scenario.path}`, {
      method: scenario.method,
      headers: scenario.headers,
      ...(body !== undefined ? { body } : {}),
    })
    const text = await res.text()
    if (res.status >= 200 && res.status < 300) return undefined
    return `HTTP ${res.status}: ${text.slice(0, 300)}`
  } catch (error) {
    return `request failed: ${error instanceof Error ? error.message : String(error)}`
  }
}

async function runScenario(
  baseUrl: string,
  scenario: Scenario,
  load: Load,
  warmupS: number,
): Promise<Measurement> {
  process.stderr.write(`→ ${scenario.name}: warm-up ${warmupS} s, then ${load.durationS} s\n`)
  const preflightProblem = await preflight(baseUrl, scenario)
  await fire(baseUrl, scenario, { ...load, durationS: warmupS })
  const { result: r, latenciesMs } = await fire(baseUrl, scenario, load)
  latenciesMs.sort()
  const statusCodes = Object.fromEntries(
    Object.entries(r.statusCodeStats).map(([code, s]) => [code, s.count]),
  )
  return {
    scenario,
    reqPerSec: r.requests.average,
    p50Ms: percentile(latenciesMs, 0.5),
    p99Ms: percentile(latenciesMs, 0.99),
    requests: Object.values(statusCodes).reduce((a, b) => a + b, 0),
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    ...(preflightProblem !== undefined ? { preflightProblem } : {}),
  }
}

async function main(): Promise<number> {
  const load: Load = {
    durationS: envNumber('BENCH_DURATION', 5, false),
    connections: envNumber('BENCH_CONNECTIONS', 10, true),
  }
  const warmupS = envNumber('BENCH_WARMUP', 1, false)
  const pgUrl = process.env.COFFER_BENCH_DATABASE_URL || undefined
  const results: Measurement[] = []
  const record = (m: Measurement) => {
    results.push(m)
    process.stdout.write(`${formatLine(m, results[0]?.reqPerSec)}\n`)
    if (isBroken(m)) process.stderr.write(`\n${formatProblems(m)}\n\n`)
  }

  const bare = await startBareServer()
  try {
    record(await runScenario(bare.url, bareScenario, load, warmupS))
  } finally {
    await bare.stop()
  }

  const coffer = await startCofferServer(pgUrl)
  try {
    for (const scenario of cofferScenarios(coffer.info)) {
      record(await runScenario(coffer.url, scenario, load, warmupS))
    }
  } finally {
    await coffer.stop()
  }

  const run: RunInfo = {
    date: new Date(),
    durationS: load.durationS,
    warmupS,
    connections: load.connections,
    database: pgUrl
      ? `PostgreSQL (${redactUrl(pgUrl)}, fresh schema)`
      : 'SQLite (fresh file in a temp dir)',
    node: process.version,
    cpus: cpus().length,
  }
  const text = markdown(run, results)
  writeReport(RESULTS_FILE, text)
  process.stdout.write(`\n${text}\nwritten to ${relative(process.cwd(), RESULTS_FILE)}\n`)

  const broken = results.filter(isBroken)
  if (broken.length > 0) {
    process.stderr.write(
      `\n!!! ${broken.length} scenario(s) BROKEN: ${broken.map((m) => m.scenario.name).join(', ')}\n`,
    )
    return 1
  }
  return 0
}

let interrupted = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true
    process.stderr.write(`\n${signal}: stopping servers and removing their data\n`)
    void stopAll().finally(() => process.exit(130))
  })
}

main().then(
  async (code) => {
    await stopAll()
    if (!interrupted) process.exit(code)
  },
  async (error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? error.stack : String(error)}\n`)
    await stopAll()
    process.exit(1)
  },
)
