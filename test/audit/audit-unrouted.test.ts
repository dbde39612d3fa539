import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyChains } from '../../src/audit/verify.js'
import { AuditWriterClosed } from '../../src/audit/writer.js'
import { digestSecret } from '../../src/crypto/secrets.js'
import { basicHeader, buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * The requests the audit hooks did not see before (issue 13): a request that presents a
 * credential (or attempts a login) to a route that does not exist, and a request refused by the
 * shutdown gate, which answers before the audit context is opened. Each leaves exactly one
 * event; nothing is authenticated for it (no credential lookup), so it is filed under no
 * account with what its header says of the credential.
 */
let t: TestApp
let lookups = 0
beforeAll(async () => {
  t = await buildTestApp()
  // Counts the credential lookups the auth hooks make (a 404 flood must start none).
  const credentials = t.deps.credentials
  const resolve = credentials.resolve.bind(credentials)
  const withPolicies = credentials.resolveWithPolicies.bind(credentials)
  credentials.resolve = (secret) => {
    lookups++
    return resolve(secret)
  }
  credentials.resolveWithPolicies = (secret) => {
    lookups++
    return withPolicies(secret)
  }
  const sats = t.deps.sats
  const resolveSat = sats.resolve.bind(sats)
  sats.resolve = (username, password) => {
    lookups++
    return resolveSat(username, password)
  }
})
afterAll(() => t.close())

type Row = Awaited<ReturnType<typeof allEvents>>[number]

const allEvents = () =>
  t.deps.store.db
    .selectFrom('audit_events')
    .selectAll()
    .orderBy('account_id')
    .orderBy('seq')
    .execute()

async function eventsOf(call: () => Promise<unknown>): Promise<Row[]> {
  const before = new Set((await allEvents()).map((e) => e.id))
  await call()
  return (await allEvents()).filter((e) => !before.has(e.id))
}

const refOf = (key: string) => digestSecret(key).slice(0, 12)
const SAT_ID = '01a00000-0000-7000-8000-0000000000aa'
/** Only in the path: must never reach an event. */
const MARKER = 'path-marker-7f3e'

describe('a request to a route that does not exist', () => {
  it('presenting a valid API key: one event, no lookup, the path not kept', async () => {
    const before = lookups
    let status = 0
    const events = await eventsOf(async () => {
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/${MARKER}/x?q=${MARKER}`,
        headers: { authorization: basicHeader(t.admin.api_key) },
      })
      status = res.statusCode
      expect(res.json().error.code).toBe('ROUTE_NOT_FOUND')
    })
    expect(status).toBe(404)
    expect(lookups).toBe(before)
    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({
      account_id: '',
      actor_user_id: null,
      credential_kind: null,
      // The same handle this key's own events carry: the auditor can tie them together.
      credential_ref: refOf(t.admin.api_key),
      sat_id: null,
      method: 'GET',
      route: '(unknown)',
      operation: 'route.not_found',
      decision: 'denied',
      reason: 'ROUTE_NOT_FOUND',
      status: 404,
      resources: '{}',
    })
    expect(JSON.stringify(events)).not.toContain(MARKER)
    // The key's own events name the same reference.
    const own = await eventsOf(() => t.api.get('/v1/vaults', { auth: t.admin.api_key }))
    expect(own[0]?.credential_ref).toBe(refOf(t.admin.api_key))
  })

  it('a SAT pair is named by its id; a header of any other shape by nothing', async () => {
    const sat = await eventsOf(() =>
      t.app.inject({
        method: 'DELETE',
        url: '/v2/nothing-here',
        headers: { authorization: basicHeader(`sat-${SAT_ID}`, 'some-secret') },
      }),
    )
    expect(sat).toHaveLength(1)
    expect(sat[0]).toMatchObject({ credential_ref: SAT_ID, sat_id: null, status: 404 })
    // A password where a key goes, a bearer token, garbage: the trail keeps no digest of it.
    for (const authorization of [
      basicHeader('my-password-1', ''),
      basicHeader('some.user', 'a-password'),
      'Bearer abc.def.ghi',
      'garbage',
    ]) {
      const events = await eventsOf(() =>
        t.app.inject({ method: 'GET', url: '/v1/nowhere', headers: { authorization } }),
      )
      expect(events, authorization).toHaveLength(1)
      expect(events[0]).toMatchObject({ credential_ref: null, route: '(unknown)', status: 404 })
    }
  })

  it('without a credential: not audited, unless it is a login attempt', async () => {
    expect(await eventsOf(() => t.app.inject({ method: 'GET', url: '/v1/nowhere' }))).toEqual([])
    for (const [method, url] of [
      ['GET', '/v1/auth/login'],
      ['POST', '/v1/auth/login/'],
      ['POST', '/V1/Auth/Login?x=1'],
    ] as const) {
      let status = 0
      const events = await eventsOf(async () => {
        const res = await t.app.inject({
          method,
          url,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: `account_id=${t.admin.account_id}&username=admin&password=${MARKER}`,
        })
        status = res.statusCode
      })
      expect(status, `${method} ${url}`).toBe(404)
      expect(events, `${method} ${url}`).toHaveLength(1)
      expect(events[0]).toMatchObject({
        account_id: '',
        actor_user_id: null,
        credential_ref: null,
        method,
        route: '(unknown)',
        decision: 'denied',
        reason: 'ROUTE_NOT_FOUND',
      })
      expect(JSON.stringify(events)).not.toContain(MARKER)
    }
  })

  it('a flood of 404s with a bogus credential: one event each, no lookup, the chain whole', async () => {
    const before = lookups
    const bogus = 'A'.repeat(36)
    const n = 60
    const events = await eventsOf(() =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          t.app.inject({
            method: 'GET',
            url: `/v1/probe/${i}`,
            headers: { authorization: basicHeader(bogus) },
          }),
        ),
      ),
    )
    expect(events).toHaveLength(n)
    expect(new Set(events.map((e) => e.transaction_id)).size).toBe(n)
    for (const e of events) expect(e.credential_ref).toBe(refOf(bogus))
    expect(lookups).toBe(before)
    expect((await verifyChains(t.deps.store.db, '')).problems).toEqual([])
  })
})

describe('a request the router refuses before any route (malformed URL, overlong parameter)', () => {
  const cases = [
    { url: `/v1/vaults/${MARKER}%E0%A4%A`, status: 400, code: 'INVALID_URL' },
    { url: `/v1/vaults/${MARKER}${'a'.repeat(9000)}`, status: 414, code: 'URI_TOO_LONG' },
  ] as const

  it.each(cases)(
    'presenting a credential: one event, no lookup, the path not kept ($status)',
    async ({ url, status, code }) => {
      const before = lookups
      let answered = 0
      const events = await eventsOf(async () => {
        const res = await t.app.inject({
          method: 'GET',
          url,
          headers: { authorization: basicHeader(t.admin.api_key) },
        })
        answered = res.statusCode
        expect(res.json().error.code).toBe(code)
      })
      expect(answered).toBe(status)
      expect(lookups).toBe(before)
      expect(events).toHaveLength(1)
      expect(events[0]).toMatchObject({
        account_id: '',
        actor_user_id: null,
        credential_ref: refOf(t.admin.api_key),
        method: 'GET',
        route: '(unknown)',
        operation: 'route.refused',
        decision: 'denied',
        reason: code,
        status,
        resources: '{}',
      })
      expect(JSON.stringify(events)).not.toContain(MARKER)
    },
  )

  it.each(cases)('without a credential: not audited ($status)', async ({ url, status }) => {
    let answered = 0
    const events = await eventsOf(async () => {
      answered = (await t.app.inject({ method: 'GET', url })).statusCode
    })
    expect(answered).toBe(status)
    expect(events).toEqual([])
  })
})

describe('a request refused by the shutdown gate', () => {
  let s: TestApp
  beforeAll(async () => {
    s = await buildTestApp()
  })
  afterAll(() => s.close())

  const events = (account: string) =>
    s.deps.store.db
      .selectFrom('audit_events')
      .selectAll()
      .where('account_id', '=', account)
      .orderBy('seq')
      .execute()

  it('leaves one event while the trail is open, and none (answer unchanged) once it is closed', async () => {
    s.deps.health.startDraining()
    s.deps.health.startClosing()
    const before = await events('')
    const refused = await s.app.inject({
      method: 'GET',
      url: '/v1/vaults',
      headers: { authorization: basicHeader(s.admin.api_key) },
    })
    expect(refused.statusCode).toBe(503)
    expect(refused.json().error.code).toBe('SHUTTING_DOWN')
    const after = await events('')
    expect(after).toHaveLength(before.length + 1)
    expect(after.at(-1)).toMatchObject({
      account_id: '',
      actor_user_id: null,
      credential_ref: refOf(s.admin.api_key),
      method: 'GET',
      route: '/v1/vaults',
      operation: 'vault.list',
      decision: 'error',
      reason: 'SHUTTING_DOWN',
      status: 503,
    })
    // Nothing under the key's account: it was not authenticated.
    const accountEvents = (await events(s.admin.account_id)).length
    // A 404 refused at the gate is audited as one too.
    const unknown = await s.app.inject({
      method: 'GET',
      url: '/v1/nowhere',
      headers: { authorization: basicHeader(s.admin.api_key) },
    })
    expect(unknown.statusCode).toBe(503)
    expect((await events('')).at(-1)).toMatchObject({ route: '(unknown)', status: 503 })

    // Shutdown closes the trail before the store: a request still refused after that keeps its
    // answer (503 SHUTTING_DOWN, nothing served) and its event is not stored.
    const writer = s.deps.audit
    if (!writer) throw new Error('the test app has an audit trail')
    await writer.close()
    await expect(writer.append(after.at(-1) as never)).rejects.toBeInstanceOf(AuditWriterClosed)
    const count = (await events('')).length
    const late = await s.app.inject({
      method: 'GET',
      url: '/v1/vaults',
      headers: { authorization: basicHeader(s.admin.api_key) },
    })
    expect(late.statusCode).toBe(503)
    expect(late.json().error.code).toBe('SHUTTING_DOWN')
    expect(late.headers['retry-after']).toBe('1')
    expect((await events('')).length).toBe(count)
    expect((await events(s.admin.account_id)).length).toBe(accountEvents)
    expect((await verifyChains(s.deps.store.db)).problems).toEqual([])
  })
})
