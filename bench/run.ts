/**
 * `npm run bench`: HTTP throughput and latency of Coffer against a bare Fastify baseline.
 *
 * Then BLOB throughput: generated BLOBs uploaded (multipart, streamed) and downloaded on a fresh
 * Coffer server, with the server's RSS watched from /proc; on S3 (s3rver) too when asked.
 *
 * Env: BENCH_DURATION (seconds per scenario, default 5), BENCH_CONNECTIONS (default 10),
 * BENCH_WARMUP (seconds, default 1), COFFER_BENCH_DATABASE_URL (postgres://…: run Coffer on
 * PostgreSQL in a fresh schema, dropped afterwards; default a fresh SQLite file in a temp dir),
 * BENCH_BLOB_ROUNDS (uploads and downloads per store, default 3), BENCH_BLOB_MIB (MiB per BLOB,
 * default and at most 50, the server's limit), COFFER_BENCH_BLOB_STORE (`s3`: also measure BLOBs
 * on an s3rver in its own process; default only the file store), BENCH_PARTS (`http`, `blobs`
 * or both, comma-separated; default both).
 * Writes bench/results/latest.md; exits 1 if any scenario saw non-2xx responses or errors, or a
 * BLOB request failed or came back different.
 */
import { cpus } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { type BlobMeasurement, failedBlobMeasurement, MiB, measureBlobs } from './blobs.js'
import {
  formatBlobLine,
  formatBlobProblems,
  formatLine,
  formatProblems,
  isBlobBroken,
  isBroken,
  type Measurement,
  markdown,
  type RunInfo,
  writeReport,
} from './report.js'
import { bareScenario, cofferScenarios, type Scenario } from './scenarios.js'
import { startBareServer, startCofferServer, startS3Server, stopAll } from './servers.js'

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

/** The BLOB part on a Coffer server of its own (a clean baseline), on files or on s3rver. */
async function runBlobs(
  store: 'fs' | 's3',
  pgUrl: string | undefined,
  rounds: number,
  sizeBytes: number,
): Promise<BlobMeasurement> {
  process.stderr.write(`→ BLOB ${store}: ${rounds} x ${sizeBytes / MiB} MiB up, then down\n`)
  const s3 = store === 's3' ? await startS3Server() : undefined
  try {
    const coffer = await startCofferServer({ pgUrl, s3 })
    try {
      return await measureBlobs(coffer, rounds, sizeBytes, (line) =>
        process.stderr.write(`${line}\n`),
      )
    } catch (error) {
      return failedBlobMeasurement(store, rounds, sizeBytes, error)
    } finally {
      await coffer.stop()
    }
  } finally {
    await s3?.stop()
  }
}

/** BENCH_PARTS: `http`, `blobs` or both (the default), comma-separated. */
function benchParts(): { http: boolean; blobs: boolean } {
  const raw = (process.env.BENCH_PARTS ?? '').trim()
  if (raw === '') return { http: true, blobs: true }
  const parts = raw.split(',').map((p) => p.trim())
  const unknown = parts.filter((p) => p !== 'http' && p !== 'blobs')
  if (unknown.length > 0) throw new Error(`BENCH_PARTS takes http and/or blobs (got ${raw})`)
  return { http: parts.includes('http'), blobs: parts.includes('blobs') }
}

function blobStores(): ('fs' | 's3')[] {
  const raw = (process.env.COFFER_BENCH_BLOB_STORE ?? '').trim()
  if (raw === '' || raw === 'fs') return ['fs']
  if (raw === 's3') return ['fs', 's3']
  throw new Error(`COFFER_BENCH_BLOB_STORE must be fs or s3 (got ${raw})`)
}

async function main(): Promise<number> {
  const load: Load = {
    durationS: envNumber('BENCH_DURATION', 5, false),
    connections: envNumber('BENCH_CONNECTIONS', 10, true),
  }
  const warmupS = envNumber('BENCH_WARMUP', 1, false)
  const pgUrl = process.env.COFFER_BENCH_DATABASE_URL || undefined
  const blobRounds = envNumber('BENCH_BLOB_ROUNDS', 3, true)
  const blobMiB = envNumber('BENCH_BLOB_MIB', 50, false)
  if (blobMiB > 50) throw new Error(`BENCH_BLOB_MIB must be at most 50 (got ${blobMiB})`)
  const blobBytes = Math.round(blobMiB * MiB)
  const stores = blobStores()
  const parts = benchParts()
  const results: Measurement[] = []
  const record = (m: Measurement) => {
    results.push(m)
    process.stdout.write(`${formatLine(m, results[0]?.reqPerSec)}\n`)
    if (isBroken(m)) process.stderr.write(`\n${formatProblems(m)}\n\n`)
  }

  if (parts.http) {
    const bare = await startBareServer()
    try {
      record(await runScenario(bare.url, bareScenario, load, warmupS))
    } finally {
      await bare.stop()
    }

    const coffer = await startCofferServer({ pgUrl })
    try {
      for (const scenario of cofferScenarios(coffer.info)) {
        record(await runScenario(coffer.url, scenario, load, warmupS))
      }
    } finally {
      await coffer.stop()
    }
  }

  const blobs: BlobMeasurement[] = []
  for (const store of parts.blobs ? stores : []) {
    const b = await runBlobs(store, pgUrl, blobRounds, blobBytes)
    blobs.push(b)
    process.stdout.write(`${formatBlobLine(b)}\n`)
    if (isBlobBroken(b)) process.stderr.write(`\n${formatBlobProblems(b)}\n\n`)
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
    blobRounds,
    blobBytes,
  }
  const text = markdown(run, results, blobs)
  writeReport(RESULTS_FILE, text)
  process.stdout.write(`\n${text}\nwritten to ${relative(process.cwd(), RESULTS_FILE)}\n`)

  const broken = [
    ...results.filter(isBroken).map((m) => m.scenario.name),
    ...blobs.filter(isBlobBroken).map((b) => `BLOB ${b.store}`),
  ]
  if (broken.length > 0) {
    process.stderr.write(`\n!!! ${broken.length} scenario(s) BROKEN: ${broken.join(', ')}\n`)
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
