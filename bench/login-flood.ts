/**
 * The login-flood part (BENCH_PARTS `flood`; security review, finding 3): document-read and
 * BLOB-download latency on an idle server, then while BENCH_FLOOD_CONNECTIONS (default 100)
 * connections send bad logins with random usernames, each from a random client address (the
 * bench plays a proxy on loopback and names the client in X-Forwarded-For, as a flood from many
 * addresses would look). Target: each p99 under flood stays below twice its idle p99.
 *
 * Two servers: one with the default login limits (the flood is soon answered 429 before any
 * hashing), one with them lifted (every flood request reaches argon2: this measures the bounded
 * hashing alone). Both use the production argon2 cost and the default concurrency bounds.
 * Each server is measured BENCH_FLOOD_ROUNDS times (default 3), idle then flooded, and the
 * verdict is the median of the rounds' ratios: one noisy round on a shared box decides nothing.
 */
import { randomBytes } from 'node:crypto'
import autocannon from 'autocannon'
import { envNumber, type Load, runScenario } from './load.js'
import type { Measurement } from './report.js'
import type { Scenario } from './scenarios.js'
import { startCofferServer } from './servers.js'

/** The BLOB the download scenario reads: 2 MiB, as in the review's measurement. */
const BLOB_BYTES = 2 * 1024 * 1024
/** Downloads are few and large: two connections, so they measure latency, not bandwidth. */
const BLOB_CONNECTIONS = 2
/** p99 under flood may be at most this many times its idle p99. */
export const FLOOD_TARGET_RATIO = 2

export type LimitsMode = 'on' | 'off'

export interface FloodPhase {
  docs: Measurement
  blob: Measurement
}

/** One round: the same reads idle, then under the flood. */
export interface FloodRound {
  idle: FloodPhase
  flood: FloodPhase
}

export interface FloodVariant {
  limits: LimitsMode
  rounds: FloodRound[]
  /** The flood's own answers, by status (401 hashed, 429 limited, 503 hashing queue full). */
  floodStatusCodes: Record<string, number>
  floodPerSec: number
}

const basic = (user: string) => `Basic ${Buffer.from(`${user}:`).toString('base64')}`
const randomAddress = () => `10.${[...randomBytes(3)].join('.')}`

async function uploadBlob(base: string, apiKey: string, vaultId: string): Promise<string> {
  const form = new FormData()
  form.append('file', new Blob([randomBytes(BLOB_BYTES)]), 'flood-bench.bin')
  const res = await fetch(`${base}/v1/vaults/${vaultId}/blobs`, {
    method: 'POST',
    headers: { authorization: basic(apiKey) },
    body: form,
  })
  const body = (await res.json()) as { blob_id?: string }
  if (res.status !== 200 || !body.blob_id) throw new Error(`BLOB upload: HTTP ${res.status}`)
  return body.blob_id
}

/** Bad logins with random usernames from random addresses until stopped. */
function startFlood(base: string, accountId: string, connections: number) {
  let done: (r: autocannon.Result) => void = () => {}
  let failed: (e: Error) => void = () => {}
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    done = resolve
    failed = reject
  })
  const instance = autocannon(
    {
      url: `${base}/v1/auth/login`,
      method: 'POST',
      connections,
      duration: 3600,
      timeout: 30,
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            headers: {
              'content-type': 'application/x-www-form-urlencoded',
              'x-forwarded-for': randomAddress(),
            },
            body: new URLSearchParams({
              account_id: accountId,
              username: `flood-${randomBytes(6).toString('hex')}`,
              password: 'not the password',
            }).toString(),
          }),
        },
      ],
    },
    (error, result) => (error ? failed(error) : done(result)),
  )
  // Stopping twice is harmless: autocannon reports once, both callers get that report.
  return {
    stop: () => {
      instance.stop()
      return finished
    },
  }
}

async function measurePhase(
  base: string,
  scenarios: { docs: Scenario; blob: Scenario },
  load: Load,
  warmupS: number,
): Promise<FloodPhase> {
  const docs = await runScenario(base, scenarios.docs, load, warmupS)
  const blob = await runScenario(
    base,
    scenarios.blob,
    { ...load, connections: BLOB_CONNECTIONS },
    warmupS,
  )
  return { docs, blob }
}

async function runVariant(
  limits: LimitsMode,
  pgUrl: string | undefined,
  load: Load,
  warmupS: number,
  floodConnections: number,
): Promise<FloodVariant> {
  const coffer = await startCofferServer({ pgUrl, loginLimits: limits })
  try {
    const { info, url } = coffer
    const authorization = basic(info.adminApiKey)
    const blobId = await uploadBlob(url, info.adminApiKey, info.vaultId)
    const scenarios = {
      docs: {
        name: `flood (limits ${limits}): GET /v2/vaults/{v}/documents/{id}`,
        server: 'coffer',
        method: 'GET',
        path: `/v2/vaults/${info.vaultId}/documents/${info.documentId}`,
        headers: { authorization },
      },
      blob: {
        name: `flood (limits ${limits}): GET /v1/vaults/{v}/blobs/{id} (2 MiB)`,
        server: 'coffer',
        method: 'GET',
        path: `/v1/vaults/${info.vaultId}/blobs/${blobId}`,
        headers: { authorization },
      },
    } satisfies Record<string, Scenario>
    const rounds: FloodRound[] = []
    const statusCodes: Record<string, number> = {}
    let floodPerSec = 0
    for (let round = 1; round <= floodRounds(); round++) {
      process.stderr.write(`→ login flood, limits ${limits}, round ${round}: idle\n`)
      const idle = await measurePhase(url, scenarios, load, warmupS)
      process.stderr.write(`→ login flood, limits ${limits}, round ${round}: flooded\n`)
      const flood = startFlood(url, info.accountId, floodConnections)
      // The flood is stopped whatever happens to the measurement.
      const during = await measurePhase(url, scenarios, load, warmupS).finally(() => flood.stop())
      const result = await flood.stop()
      for (const [code, s] of Object.entries(result.statusCodeStats))
        statusCodes[code] = (statusCodes[code] ?? 0) + s.count
      floodPerSec += result.requests.average / floodRounds()
      rounds.push({ idle, flood: during })
    }
    return { limits, rounds, floodStatusCodes: statusCodes, floodPerSec }
  } finally {
    await coffer.stop()
  }
}

export function floodConnections(): number {
  return envNumber('BENCH_FLOOD_CONNECTIONS', 100, true)
}

export function floodRounds(): number {
  return envNumber('BENCH_FLOOD_ROUNDS', 3, true)
}

export async function runLoginFloodBench(
  pgUrl: string | undefined,
  load: Load,
  warmupS: number,
  onVariant: (v: FloodVariant) => void,
): Promise<FloodVariant[]> {
  const variants: FloodVariant[] = []
  for (const limits of ['on', 'off'] as const) {
    const v = await runVariant(limits, pgUrl, load, warmupS, floodConnections())
    variants.push(v)
    onVariant(v)
  }
  return variants
}

const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-')
const ratioOf = (flood: number, idle: number) => (idle > 0 ? flood / idle : Number.NaN)

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

function rows(v: FloodVariant): string[] {
  return (['docs', 'blob'] as const).map((k) => {
    const ratios = v.rounds.map((r) => ratioOf(r.flood[k].p99Ms, r.idle[k].p99Ms))
    const r = median(ratios)
    const verdict = r < FLOOD_TARGET_RATIO ? 'ok' : 'OVER'
    const name = k === 'docs' ? 'document read' : 'BLOB download (2 MiB)'
    const idle = median(v.rounds.map((x) => x.idle[k].p99Ms))
    const flood = median(v.rounds.map((x) => x.flood[k].p99Ms))
    const perSec = median(v.rounds.map((x) => x.flood[k].reqPerSec))
    const each = ratios.map((x) => `${x.toFixed(2)}x`).join(', ')
    return `| ${v.limits} | ${name} | ${ms(idle)} | ${ms(flood)} | ${r.toFixed(2)}x ${verdict} | ${each} | ${perSec.toFixed(0)} |`
  })
}

export function floodLines(variants: FloodVariant[]): string[] {
  return variants.flatMap((v) => [
    ...rows(v),
    `  flood (limits ${v.limits}): ${v.floodPerSec.toFixed(0)} logins/s, ${JSON.stringify(v.floodStatusCodes)}`,
  ])
}

/** A measured read that failed (not the flood's own 401/429/503) breaks the run. */
export function floodBroken(variants: FloodVariant[]): string[] {
  return variants.flatMap((v) =>
    v.rounds
      .flatMap((r) => [r.idle.docs, r.idle.blob, r.flood.docs, r.flood.blob])
      .filter((m) => m.non2xx > 0 || m.errors > 0 || m.preflightProblem !== undefined)
      .map((m) => m.scenario.name),
  )
}

export function floodMarkdown(
  run: {
    date: Date
    durationS: number
    warmupS: number
    connections: number
    database: string
    node: string
    cpus: number
  },
  variants: FloodVariant[],
): string {
  const flood = variants.map(
    (v) =>
      `- limits ${v.limits}: ${v.floodPerSec.toFixed(0)} logins/s answered, by status ${JSON.stringify(v.floodStatusCodes)}`,
  )
  return [
    '# Login flood',
    '',
    `${run.date.toISOString()} · ${run.database} · Node ${run.node} · ${run.cpus} CPUs · ` +
      `${run.durationS} s per measurement after ${run.warmupS} s warm-up · document reads on ` +
      `${run.connections} connections, BLOB downloads on ${BLOB_CONNECTIONS} · flood on ` +
      `${floodConnections()} connections, random usernames and client addresses`,
    '',
    `Target: p99 under flood < ${FLOOD_TARGET_RATIO}x idle p99. "limits on": the default login ` +
      'limits; "limits off": every flood request reaches argon2 (the bounded hashing alone). ' +
      `${floodRounds()} rounds per server (idle, then flooded); p99 columns are medians of the ` +
      "rounds, the ratio is the median of the rounds' ratios (each round's listed beside it).",
    '',
    '| limits | request | idle p99 ms | flood p99 ms | median ratio | rounds | flood req/s |',
    '| --- | --- | ---: | ---: | ---: | --- | ---: |',
    ...variants.flatMap(rows),
    '',
    'The flood itself:',
    '',
    ...flood,
    '',
  ].join('\n')
}
