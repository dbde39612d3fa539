/**
 * The encrypted SQLite file on vs off (BENCH_PARTS `crypt`; issue 22, target: reads with it on at
 * ≥ 90 % of off in the same run). SQLite only (PostgreSQL's storage is its operator's).
 *
 * Two halves, each in BENCH_CRYPT_ROUNDS alternating off/on pairs (default 3; the machine may be
 * shared, and a pair run back to back sees about the same load), each pair's on/off ratio and
 * their median:
 * - the Coffer child's reads (document by id, a page of 100 documents, a user) and the document
 *   create: a small database, its pages in SQLite's cache (the common case);
 * - search queries on a vault of BENCH_CRYPT_SEARCH_DOCUMENTS documents (default 10000; 0 skips
 *   it): an index larger than the read workers' page caches, so pages are read from the file
 *   and decrypted while measured.
 */
import { envNumber, type Load, runScenario } from './load.js'
import type { Measurement } from './report.js'
import { cofferScenarios } from './scenarios.js'
import { searchBody, searchQueries } from './search-queries.js'
import { startCofferServer, startSearchServer } from './servers.js'

/** The Coffer child's scenarios of the pair: three reads and the create. */
const CRYPT_SCENARIOS = [
  'GET /v2/vaults/{v}/documents/{id}',
  'GET /v1/vaults/{v}/documents?full=true&per_page=100',
  'GET /v2/users/{id}',
  'POST /v2/vaults/{v}/documents',
]
/** The search queries of the pair (bench/search-queries.ts keys). */
const CRYPT_SEARCH_QUERIES = ['eq', 'range']
/** Generous start bound for the search child: population of its vault included. */
const SEARCH_START_MS = 600_000

type Side = 'on' | 'off'

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

export async function runCryptPair(
  load: Load,
  warmupS: number,
  record: (m: Measurement) => void,
): Promise<string[]> {
  const rounds = envNumber('BENCH_CRYPT_ROUNDS', 3, true)
  const searchDocuments = envNumber('BENCH_CRYPT_SEARCH_DOCUMENTS', 10_000, true)
  const ratios: Record<string, { on: number; off: number }[]> = {}
  const add = (rates: Record<string, Partial<Record<Side, number>>>) => {
    for (const [name, r] of Object.entries(rates)) {
      if (r.on === undefined || r.off === undefined) continue
      ratios[name] = [...(ratios[name] ?? []), { on: r.on, off: r.off }]
    }
  }
  for (let round = 0; round < rounds; round++) {
    const rates: Record<string, Partial<Record<Side, number>>> = {}
    for (const side of ['off', 'on'] as const) {
      const coffer = await startCofferServer({ sqliteEncryption: side })
      try {
        for (const scenario of cofferScenarios(coffer.info)) {
          if (!CRYPT_SCENARIOS.includes(scenario.name)) continue
          const m = await runScenario(
            coffer.url,
            { ...scenario, name: `${scenario.name} (sqlite encryption ${side})` },
            load,
            warmupS,
          )
          record(m)
          rates[scenario.name] = { ...rates[scenario.name], [side]: m.reqPerSec }
        }
      } finally {
        await coffer.stop()
      }
    }
    if (searchDocuments > 0) {
      for (const side of ['off', 'on'] as const) {
        const server = await startSearchServer(searchDocuments, undefined, SEARCH_START_MS, 0, side)
        try {
          const { info } = server
          for (const def of searchQueries(info.schemaId, info.controlName)) {
            if (!CRYPT_SEARCH_QUERIES.includes(def.key)) continue
            const name = `search ${def.key} @ ${searchDocuments}`
            await server.settle()
            const m = await runScenario(
              server.url,
              {
                name: `${name} (sqlite encryption ${side})`,
                server: 'coffer',
                method: 'POST',
                path: `/v1/vaults/${info.vaultId}/search`,
                headers: {
                  authorization: `Basic ${Buffer.from(`${info.adminApiKey}:`).toString('base64')}`,
                  'content-type': 'application/x-www-form-urlencoded',
                },
                body: searchBody(def.option),
              },
              load,
              warmupS,
              server.settle,
            )
            record(m)
            rates[name] = { ...rates[name], [side]: m.reqPerSec }
          }
        } finally {
          await server.stop()
        }
      }
    }
    add(rates)
  }
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`
  return Object.entries(ratios).map(([name, pairs]) => {
    const each = pairs.map((p) => `${p.on.toFixed(0)}/${p.off.toFixed(0)}=${pct(p.on / p.off)}`)
    return `sqlite encryption on/off ${name}: median ${pct(median(pairs.map((p) => p.on / p.off)))} (${each.join(', ')})`
  })
}
