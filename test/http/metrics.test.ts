import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { Metrics } from '../../src/metrics/prometheus.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import { multipart } from '../helpers/blob-harness.js'
import { codeAtOffset, enrolledUser, login, mfaPath } from '../helpers/mfa.js'
import { insertDocument, insertSchema, optionForm } from '../helpers/search-fixtures.js'

const TOKEN = 'metrics-token-0123456789abcdef-0123456789'

/** Prometheus text format: `# HELP`/`# TYPE` lines and `name{label="v",…} value` samples. */
function parseSamples(text: string): Map<string, number> {
  const samples = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue
    const m =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$/.exec(
        line,
      )
    if (!m) throw new Error(`not Prometheus text: ${line}`)
    samples.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]))
  }
  return samples
}

describe('GET /metrics behind a bearer token', () => {
  let t: TestApp
  let metrics: Metrics
  const scrape = async () => {
    const res = await t.api.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/)
    return { text: res.body, samples: parseSamples(res.body) }
  }
  const value = async (series: string) => (await scrape()).samples.get(series) ?? 0

  beforeAll(async () => {
    metrics = new Metrics()
    t = await buildTestApp({ metrics: { metrics, serve: true, token: TOKEN } })
  })
  afterAll(() => t.close())

  it('refuses a missing or wrong token with 401 in the envelope, in constant time', async () => {
    for (const authorization of [
      undefined,
      `Bearer ${TOKEN}x`,
      `Bearer ${TOKEN.slice(1)}`,
      TOKEN,
      'Bearer ',
    ]) {
      const res = await t.api.get('/metrics', authorization ? { headers: { authorization } } : {})
      expect(res.statusCode, authorization).toBe(401)
      expect(errorOf(res).code).toBe('UNAUTHENTICATED')
      expect(res.headers['www-authenticate']).toBe('Bearer')
    }
  })

  it('answers parseable Prometheus text with process, event-loop and HTTP metrics', async () => {
    await t.api.get('/healthz')
    const { samples, text } = await scrape()
    expect(text).toMatch(/# TYPE nodejs_eventloop_lag_seconds gauge/)
    expect(text).toMatch(/# TYPE coffer_http_request_duration_seconds histogram/)
    expect(samples.get('coffer_http_requests_in_flight{listener="api"}')).toBe(1)
    expect(
      samples.get(
        'coffer_http_requests_total{listener="api",method="GET",route="/healthz",status="200"}',
      ),
    ).toBe(1)
  })

  it('labels requests by route template and status, never by URL or id', async () => {
    const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'm' } })
    const vaultId = v.json().vault.id as string
    await t.api.get(`/v1/vaults/${vaultId}`, { auth: t.admin.api_key })
    await t.api.get(`/v1/vaults/${randomUUID()}`, { auth: t.admin.api_key })
    await t.api.get(`/no/such/${randomUUID()}?secret=x`)
    const { text, samples } = await scrape()
    const series = '{listener="api",method="GET",route="/v1/vaults/:vault_id",status="200"}'
    expect(samples.get(`coffer_http_requests_total${series}`)).toBe(1)
    expect(samples.get(`coffer_http_request_duration_seconds_count${series}`)).toBe(1)
    expect(text).toMatch(/route="\/v1\/vaults\/:vault_id",status="404"/)
    expect(text).toMatch(/route="unmatched",status="404"/)
    expect(text).not.toContain(vaultId)
    expect(text).not.toContain('secret')
  })

  it('counts login failures, MFA-less throttles and never names the user', async () => {
    const user = await createUser(t, {
      username: 'metrics-login-user',
      password: 'a long password 1',
    })
    const failures = 'coffer_login_failures_total{reason="credentials"}'
    const before = await value(failures)
    for (const password of ['wrong', 'also wrong']) {
      const res = await t.api.post('/v1/auth/login', {
        form: { account_id: t.admin.account_id, username: user.username, password },
      })
      expect(res.statusCode).toBe(401)
    }
    const { text, samples } = await scrape()
    expect(samples.get(failures)).toBe(before + 2)
    expect(samples.has('coffer_login_throttled_total{reason="limit"}')).toBe(true)
    expect(samples.has('coffer_mfa_failures_total{operation="login"}')).toBe(true)
    for (const secret of [user.username, user.id, t.admin.account_id, t.admin.api_key]) {
      expect(text).not.toContain(secret)
    }
  })

  it('counts SAT uses', async () => {
    const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'sat' } })
    const vaultId = v.json().vault.id as string
    const res = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'sat',
        policy: [{ Resources: [`Vault::${vaultId}`], Activities: 'R' }],
        not_valid_after: new Date(Date.now() + 3_600_000).toISOString(),
        allowed_uses: 5,
      },
    })
    expect(res.statusCode, res.body).toBe(200)
    const basic = res.json().scoped_access_token.http_auth
    const before = await value('coffer_sat_uses_total')
    for (let i = 0; i < 3; i++) {
      expect((await t.api.get(`/v1/vaults/${vaultId}`, { basic })).statusCode).toBe(200)
    }
    expect(await value('coffer_sat_uses_total')).toBe(before + 3)
    expect((await scrape()).text).not.toContain(res.json().scoped_access_token.id)
  })

  it('counts BLOB bytes in and out', async () => {
    const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'blob' } })
    const vaultId = v.json().vault.id as string
    const data = Buffer.alloc(200_000, 7)
    const bytesIn = 'coffer_blob_bytes_total{direction="in"}'
    const bytesOut = 'coffer_blob_bytes_total{direction="out"}'
    const [in0, out0] = [await value(bytesIn), await value(bytesOut)]
    const m = multipart([{ name: 'file', filename: 'f.bin', data }])
    const up = await t.app.inject({
      method: 'POST',
      url: `/v1/vaults/${vaultId}/blobs`,
      headers: {
        'content-type': m.contentType,
        authorization: `Basic ${Buffer.from(`${t.admin.api_key}:`).toString('base64')}`,
      },
      payload: m.payload,
    })
    expect(up.statusCode, up.body).toBe(200)
    const blobId = up.json().blob_id ?? up.json().blob.id
    const down = await t.api.get(`/v1/vaults/${vaultId}/blobs/${blobId}`, {
      auth: t.admin.api_key,
    })
    expect(down.rawPayload.length).toBe(data.length)
    expect(await value(bytesIn)).toBe(in0 + data.length)
    expect(await value(bytesOut)).toBe(out0 + data.length)
  })

  it('times searches', async () => {
    const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'search' } })
    const vaultId = v.json().vault.id as string
    const fields = [{ name: 'name', type: 'string' as const, index: true }]
    const schema = await insertSchema(t, t.admin.account_id, vaultId, fields)
    await insertDocument(t, {
      accountId: t.admin.account_id,
      vaultId,
      schema,
      content: { name: 'Alice' },
    })
    const count = 'coffer_search_duration_seconds_count{outcome="ok"}'
    const before = await value(count)
    const res = await t.api.post(`/v1/vaults/${vaultId}/search`, {
      auth: t.admin.api_key,
      multipart: optionForm({
        schema_id: schema.id,
        filter: { name: { type: 'eq', value: 'Alice' } },
      }),
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(await value(count)).toBe(before + 1)
  })
})

describe('GET /metrics guard', () => {
  it('is off by default: 404', async () => {
    const t = await buildTestApp()
    try {
      const res = await t.api.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })
      expect(res.statusCode).toBe(404)
    } finally {
      await t.close()
    }
  })

  it('with its own port, the API listener does not serve it (only counts its requests)', async () => {
    const metrics = new Metrics()
    const t = await buildTestApp({ metrics: { metrics, serve: false } })
    try {
      expect((await t.api.get('/metrics')).statusCode).toBe(404)
      expect(await metrics.text()).toMatch(/route="unmatched",status="404"/)
    } finally {
      await t.close()
    }
  })
})

describe('MFA failures in metrics', () => {
  it('count a wrong code at login and at unenroll, never naming the user', async () => {
    const clock = new ManualClock('2026-03-01T00:00:10.000Z')
    const metrics = new Metrics()
    const t = await buildTestApp({ clock, metrics: { metrics, serve: false } })
    try {
      const user = await enrolledUser(t, clock, 'a long password 2')
      const wrong = codeAtOffset(user.secret, clock, 10)
      const res = await login(t, {
        account_id: t.admin.account_id,
        username: user.username,
        password: 'a long password 2',
        mfa_code: wrong,
      })
      expect(res.statusCode).toBe(401)
      const off = await t.api.post(mfaPath(user.id, 'unenroll'), {
        auth: t.admin.api_key,
        json: { mfa_code: wrong, password: 'a long password 2' },
      })
      expect(off.statusCode).toBeGreaterThanOrEqual(400)
      expect(off.statusCode).toBeLessThan(500)
      const samples = parseSamples(await metrics.text())
      expect(samples.get('coffer_mfa_failures_total{operation="login"}')).toBe(1)
      expect(samples.get('coffer_mfa_failures_total{operation="unenroll"}')).toBe(1)
      expect(samples.get('coffer_login_failures_total{reason="credentials"}')).toBe(1)
      expect(await metrics.text()).not.toContain(user.username)
    } finally {
      await t.close()
    }
  })
})
