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
 * on an s3rver in its own process; default only the file store), BENCH_PARTS (`http`, `blobs`,
 * `search`, comma-separated; default all three), BENCH_SEARCH_SIZES (documents per search run,
 * comma-separated; default 10000,100000; add 1000000 for the full table, which takes ~20 minutes
 * and ~7 GB of temp disk on SQLite), BENCH_SEARCH_MAX_DURATION (seconds, default 60: the longest
 * load for one slow search query; see bench/search.ts), BENCH_SEARCH_SCENARIOS (`queries`,
 * `stall`, comma-separated; default both), BENCH_STALL_DURATION (seconds of each phase of the
 * "no stall" scenario, default 15; see bench/search-stall.ts).
 *
 * Then search (bench/search.ts): for each size, a Coffer child whose vault holds that many
 * documents, written straight to its database before it listens, and six search queries (plus a
 * one-match control) under autocannon.
 *
 * Then the consent API (bench/consent.ts, BENCH_PARTS `consent`): GET of an existing record and
 * POST update against bare Fastify, BENCH_CONSENT_ROUNDS interleaved rounds (default 3), medians.
 *
 * The audit pair (BENCH_PARTS `audit`): document read and create with the trail off, then on, in
 * BENCH_AUDIT_ROUNDS alternating pairs (default 3); each pair's on/off ratio and their median.
 * BENCH_CPU_PROF_DIR: every server child writes a V8 CPU profile there when it stops.
 *
 * The crypt pair (BENCH_PARTS `crypt`, SQLite only; bench/crypt.ts): reads and the document
 * create with the SQLite file in plaintext, then encrypted (as `coffer serve` keeps it), plus two
 * search queries on BENCH_CRYPT_SEARCH_DOCUMENTS documents (default 10000), in
 * BENCH_CRYPT_ROUNDS alternating pairs (default 3); each pair's on/off ratio and their median.
 * Every other part runs its SQLite children encrypted.
 *
 * Then the login flood (bench/login-flood.ts, BENCH_PARTS `flood`): document-read and 2 MiB
 * BLOB-download p99, idle and during BENCH_FLOOD_CONNECTIONS (default 100) connections of bad
 * logins with random usernames and addresses, with the login limits on and lifted, in
 * BENCH_FLOOD_ROUNDS rounds (default 3; medians); written to login-flood.md
 * (login-flood-postgres.md on PostgreSQL).
 *
 * Writes latest.md (http, blobs), search.md (search; on PostgreSQL search-postgres.md),
 * consent.md (consent; on PostgreSQL consent-postgres.md) and login-flood.md into bench/out/
 * (gitignored), or into the committed bench/results/ with `--save` or BENCH_SAVE=1
 * (bench/results-dir.ts); exits 1 if
 * any scenario saw non-2xx responses or errors, a BLOB request failed or came back different,
 * or a search server failed to start.
 */
import { cpus } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type BlobMeasurement, failedBlobMeasurement, MiB, measureBlobs } from './blobs.js'
import {
  type ConsentScenarioResult,
  consentBroken,
  consentLines,
  consentMarkdown,
  consentRounds,
  runConsentBench,
} from './consent.js'
import { runCryptPair } from './crypt.js'
import { envNumber, type Load, runScenario } from './load.js'
import {
  type FloodVariant,
  floodBroken,
  floodLines,
  floodMarkdown,
  runLoginFloodBench,
} from './login-flood.js'
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
import { resultsDir } from './results-dir.js'
import { bareScenario, cofferScenarios } from './scenarios.js'
import {
  formatSearchLine,
  runSearchBench,
  type SearchSizeResult,
  searchBroken,
  searchMarkdown,
  searchMaxDurationS,
  searchSizes,
} from './search.js'
import { startBareServer, startCofferServer, startS3Server, stopAll } from './servers.js'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
/** Checked before anything runs: a typo must not cost a long run. */
const RESULTS_DIR = resultsDir(BENCH_DIR, process.argv.slice(2), process.env)
const RESULTS_FILE = join(RESULTS_DIR, 'latest.md')
/** The search results, per engine: search.md (SQLite) or search-postgres.md. */
const searchResultsFile = (pgUrl: string | undefined) =>
  join(RESULTS_DIR, pgUrl ? 'search-postgres.md' : 'search.md')

function redactUrl(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return 'postgres://(unparseable URL)'
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

const PARTS = ['http', 'blobs', 'search', 'consent', 'flood', 'audit', 'crypt'] as const

/**
 * BENCH_PARTS: any of `http`, `blobs`, `search`, `consent`, `flood`, `audit`, `crypt`,
 * comma-separated (default all; `crypt` is skipped on PostgreSQL).
 */
function benchParts(): Record<(typeof PARTS)[number], boolean> {
  const raw = (process.env.BENCH_PARTS ?? '').trim()
  if (raw === '')
    return {
      http: true,
      blobs: true,
      search: true,
      consent: true,
      flood: true,
      audit: true,
      crypt: true,
    }
  const parts = raw.split(',').map((p) => p.trim())
  const unknown = parts.filter((p) => !(PARTS as readonly string[]).includes(p))
  if (unknown.length > 0) throw new Error(`BENCH_PARTS takes ${PARTS.join(', ')} (got ${raw})`)
  return {
    http: parts.includes('http'),
    blobs: parts.includes('blobs'),
    search: parts.includes('search'),
    consent: parts.includes('consent'),
    flood: parts.includes('flood'),
    audit: parts.includes('audit'),
    crypt: parts.includes('crypt'),
  }
}

function blobStores(): ('fs' | 's3')[] {
  const raw = (process.env.COFFER_BENCH_BLOB_STORE ?? '').trim()
  if (raw === '' || raw === 'fs') return ['fs']
  if (raw === 's3') return ['fs', 's3']
  throw new Error(`COFFER_BENCH_BLOB_STORE must be fs or s3 (got ${raw})`)
}

/** The audit pair's scenarios: the document read and the document create (issue 13). */
const AUDIT_SCENARIOS = ['GET /v2/vaults/{v}/documents/{id}', 'POST /v2/vaults/{v}/documents']

/** Middle value (the mean of the two middle ones for an even count). */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/**
 * The audit trail on vs off (issue 13; target: document reads with it on at ≥ 70% of off): the
 * same server and scenarios, one run with COFFER_AUDIT off (the bench-only setting), one with
 * the trail on, repeated BENCH_AUDIT_ROUNDS times (default 3) as alternating pairs — the machine
 * may be shared, and a pair run back to back sees about the same load. Returns the ratio lines:
 * each pair's ratio and their median.
 */
async function runAuditPair(
  pgUrl: string | undefined,
  load: Load,
  warmupS: number,
  record: (m: Measurement) => void,
): Promise<string[]> {
  const rounds = envNumber('BENCH_AUDIT_ROUNDS', 3, true)
  const ratios: Record<string, { on: number; off: number }[]> = {}
  for (let round = 0; round < rounds; round++) {
    const rates: Record<string, Partial<Record<'on' | 'off', number>>> = {}
    for (const audit of ['off', 'on'] as const) {
      const coffer = await startCofferServer({ pgUrl, audit })
      try {
        for (const scenario of cofferScenarios(coffer.info)) {
          if (!AUDIT_SCENARIOS.includes(scenario.name)) continue
          const m = await runScenario(
            coffer.url,
            { ...scenario, name: `${scenario.name} (audit ${audit})` },
            load,
            warmupS,
          )
          record(m)
          rates[scenario.name] = { ...rates[scenario.name], [audit]: m.reqPerSec }
        }
      } finally {
        await coffer.stop()
      }
    }
    for (const [name, r] of Object.entries(rates)) {
      if (r.on === undefined || r.off === undefined) continue
      ratios[name] = [...(ratios[name] ?? []), { on: r.on, off: r.off }]
    }
  }
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`
  return Object.entries(ratios).map(([name, pairs]) => {
    const each = pairs.map((p) => `${p.on.toFixed(0)}/${p.off.toFixed(0)}=${pct(p.on / p.off)}`)
    return `audit on/off ${name}: median ${pct(median(pairs.map((p) => p.on / p.off)))} (${each.join(', ')})`
  })
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

  let search: SearchSizeResult[] = []
  if (parts.search) {
    search = await runSearchBench(searchSizes(), pgUrl, load, warmupS, (size, q) => {
      process.stdout.write(`${formatSearchLine(size, q)}\n`)
      if (isBroken(q.m)) process.stderr.write(`\n${formatProblems(q.m)}\n\n`)
    })
  }

  let consent: ConsentScenarioResult[] = []
  if (parts.consent) {
    const rounds = consentRounds()
    consent = await runConsentBench(pgUrl, load, warmupS, rounds, (m, bare) => {
      process.stdout.write(`${formatLine(m, bare)}\n`)
      if (isBroken(m)) process.stderr.write(`\n${formatProblems(m)}\n\n`)
    })
    process.stdout.write(`\n${consentLines(consent).join('\n')}\n`)
  }

  let flood: FloodVariant[] = []
  if (parts.flood) {
    flood = await runLoginFloodBench(pgUrl, load, warmupS, (v) => {
      process.stdout.write(`${floodLines([v]).join('\n')}\n`)
    })
  }

  if (parts.audit) {
    process.stdout.write(`\n${(await runAuditPair(pgUrl, load, warmupS, record)).join('\n')}\n`)
  }

  if (parts.crypt && !pgUrl) {
    process.stdout.write(`\n${(await runCryptPair(load, warmupS, record)).join('\n')}\n`)
  }

  const database = pgUrl
    ? `PostgreSQL (${redactUrl(pgUrl)}, fresh schema)`
    : 'SQLite (fresh file in a temp dir)'
  if (parts.http || parts.blobs) {
    const run: RunInfo = {
      date: new Date(),
      durationS: load.durationS,
      warmupS,
      connections: load.connections,
      database,
      node: process.version,
      cpus: cpus().length,
      blobRounds,
      blobBytes,
    }
    const text = markdown(run, results, blobs)
    writeReport(RESULTS_FILE, text)
    process.stdout.write(`\n${text}\nwritten to ${relative(process.cwd(), RESULTS_FILE)}\n`)
  }
  if (parts.search) {
    const text = searchMarkdown(
      {
        date: new Date(),
        durationS: load.durationS,
        warmupS,
        connections: load.connections,
        database,
        node: process.version,
        cpus: cpus().length,
        maxDurationS: searchMaxDurationS(),
      },
      search,
    )
    const file = searchResultsFile(pgUrl)
    writeReport(file, text)
    process.stdout.write(`\nwritten to ${relative(process.cwd(), file)}\n`)
  }

  if (parts.consent) {
    const text = consentMarkdown(
      {
        date: new Date(),
        durationS: load.durationS,
        warmupS,
        connections: load.connections,
        rounds: consentRounds(),
        database,
        node: process.version,
        cpus: cpus().length,
      },
      consent,
    )
    const file = join(RESULTS_DIR, pgUrl ? 'consent-postgres.md' : 'consent.md')
    writeReport(file, text)
    process.stdout.write(`\nwritten to ${relative(process.cwd(), file)}\n`)
  }

  if (parts.flood) {
    const text = floodMarkdown(
      {
        date: new Date(),
        durationS: load.durationS,
        warmupS,
        connections: load.connections,
        database,
        node: process.version,
        cpus: cpus().length,
      },
      flood,
    )
    const file = join(RESULTS_DIR, pgUrl ? 'login-flood-postgres.md' : 'login-flood.md')
    writeReport(file, text)
    process.stdout.write(`\n${text}\nwritten to ${relative(process.cwd(), file)}\n`)
  }

  const broken = [
    ...floodBroken(flood),
    ...results.filter(isBroken).map((m) => m.scenario.name),
    ...consentBroken(consent),
    ...blobs.filter(isBlobBroken).map((b) => `BLOB ${b.store}`),
    ...searchBroken(search),
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
