import { afterAll, describe, expect, it } from 'vitest'
import { TEST_CONSENT_SECRET } from '../helpers/consent.js'
import {
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from '../helpers/processes.js'
import { testDialect } from '../helpers/store.js'

const TOKEN = 'process-metrics-token-0123456789abcdef'

async function urlFromLog(server: ServerProcess, pattern: RegExp): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const m = pattern.exec(server.output())
    if (m?.[1]) return m[1]
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`not in the log: ${pattern}\n${server.output()}`)
}

describe('coffer serve: where /metrics is served (COFFER_METRICS_*)', () => {
  const servers: ServerProcess[] = []
  let db: SharedDatabase | undefined
  afterAll(async () => {
    for (const s of servers) await s.stop()
    await db?.drop()
  })

  const serve = async (env: Record<string, string>) => {
    db ??= await sharedDatabase()
    const server = await startServerProcess({
      ...db.env(db.dataDir()),
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
      ...env,
    })
    servers.push(server)
    const consent = await urlFromLog(server, /Consent API listening at (http:\/\/127\.0\.0\.1:\d+)/)
    return { server, consent }
  }

  it('COFFER_METRICS_PORT: only on its own listener, with the token when one is set', async () => {
    const { server, consent } = await serve({
      COFFER_METRICS_PORT: '0',
      COFFER_METRICS_TOKEN: TOKEN,
    })
    const metricsUrl = await urlFromLog(server, /Metrics listening at (http:\/\/127\.0\.0\.1:\d+)/)
    await fetch(`${server.url}/healthz`)
    const auth = { authorization: `Bearer ${TOKEN}` }
    expect((await fetch(`${server.url}/metrics`, { headers: auth })).status).toBe(404)
    expect((await fetch(`${consent}/metrics`, { headers: auth })).status).toBe(404)
    const refused = await fetch(`${metricsUrl}/metrics`)
    expect(refused.status).toBe(401)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
      'UNAUTHENTICATED',
    )
    const res = await fetch(`${metricsUrl}/metrics`, { headers: auth })
    expect(res.status).toBe(200)
    const text = await res.text()
    expect(text).toMatch(
      /coffer_http_requests_total\{listener="api",method="GET",route="\/healthz",status="200"\} 1/,
    )
    expect(text).toMatch(/nodejs_eventloop_lag_seconds/)
    if (testDialect === 'postgres') {
      expect(text).toMatch(/coffer_db_pool_connections\{state="total"\} \d+/)
      expect(text).toMatch(/coffer_db_pool_waiting_requests \d+/)
    } else {
      expect(text).not.toMatch(/coffer_db_pool/)
    }
  }, 60_000)

  it('COFFER_METRICS_TOKEN alone: on both API listeners, 401 without the token', async () => {
    const { server, consent } = await serve({ COFFER_METRICS_TOKEN: TOKEN })
    const auth = { authorization: `Bearer ${TOKEN}` }
    for (const base of [server.url, consent]) {
      const refused = await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer nope' } })
      expect(refused.status).toBe(401)
      const res = await fetch(`${base}/metrics`, { headers: auth })
      expect(res.status).toBe(200)
      expect(await res.text()).toMatch(/coffer_http_requests_in_flight\{listener="consent"\}/)
    }
    expect(server.output()).not.toContain(TOKEN)
  }, 60_000)
})
