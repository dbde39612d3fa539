/** Firing a scenario with autocannon, and timing its responses. */
import autocannon from 'autocannon'
import type { Measurement } from './report.js'
import type { Scenario } from './scenarios.js'

export function envNumber(name: string, fallback: number, integer: boolean): number {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new Error(`${name} must be a positive ${integer ? 'integer' : 'number'} (got ${raw})`)
  }
  return value
}

export interface Load {
  durationS: number
  connections: number
  /** Seconds autocannon waits for each response before counting a timeout (default 10). */
  timeoutS?: number
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
    timeout: load.timeoutS ?? 10,
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
export function percentile(sorted: Float64Array, q: number): number {
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

export async function runScenario(
  baseUrl: string,
  scenario: Scenario,
  load: Load,
  warmupS: number,
  /**
   * Resolves once the server has finished earlier work. autocannon drops the requests still in
   * flight when a run ends, but the server works through them: without this, a slow scenario's
   * leftovers would land in the next measurement. Called before the pre-flight and after the
   * warm-up.
   */
  settle?: () => Promise<void>,
): Promise<Measurement> {
  process.stderr.write(`→ ${scenario.name}: warm-up ${warmupS} s, then ${load.durationS} s\n`)
  await settle?.()
  const preflightProblem = await preflight(baseUrl, scenario)
  await fire(baseUrl, scenario, { ...load, durationS: warmupS })
  await settle?.()
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
