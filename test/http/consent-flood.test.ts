import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { writeExport } from '../../src/modules/consent/consent-export.js'
import {
  buildConsentTestApp,
  CONSENT,
  type ConsentTestApp,
  emailQuery,
  expectConsentError,
  recordOf,
} from '../helpers/consent.js'

/**
 * Issue 10, finding 9: anonymous GETs created records without limit (5,000 in 4.1 s, kept for
 * ever). The consent API is now limited per client address and per shop, and records nobody
 * ever chose for expire after a while untouched, with the history left as it was.
 */
const TOO_MANY = 'Too many requests; try again later'
const DAY = 86_400_000
let seq = 0
const consumer = (shop = 'flood.example') =>
  new URLSearchParams(emailQuery(`flood-${++seq}@example.com`, shop)).toString()

/** One request over a real socket, from `localAddress` (any 127.x address is loopback). */
function send(
  port: number,
  method: 'GET' | 'POST',
  query: string,
  localAddress = '127.0.0.1',
  body?: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: `${CONSENT}?${query}`,
        localAddress,
        headers: body ? { 'content-type': 'application/json' } : {},
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        )
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

describe('consent API: flood limits per client address (real sockets)', () => {
  const PER_ADDRESS = 5
  let t: ConsentTestApp
  let port: number

  beforeAll(async () => {
    t = await buildConsentTestApp({
      withMainApp: true,
      rateLimit: { perAddress: PER_ADDRESS, perShop: 1000, windowSeconds: 60 },
    })
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    port = (t.app.server.address() as AddressInfo).port
  })
  afterAll(() => t.close())

  it(`answers ${PER_ADDRESS} requests of one address, then 429 with Retry-After`, async () => {
    for (let i = 0; i < PER_ADDRESS; i++) {
      const res = await send(port, 'GET', consumer())
      expect(res.status, res.body).toBe(200)
    }
    const records = await t.store.db.selectFrom('consent_records').select('shop').execute()
    for (const method of ['GET', 'POST'] as const) {
      const body = method === 'POST' ? '{"jwt":"x","optedOut":true}' : undefined
      const over = await send(port, method, consumer(), '127.0.0.1', body)
      expect(over.status, over.body).toBe(429)
      expect(JSON.parse(over.body)).toEqual({ error: TOO_MANY })
      expect(over.headers['content-type']).toMatch(/^application\/json/)
      expect(over.headers['cache-control']).toBe('no-store')
      const retryAfter = Number(over.headers['retry-after'])
      expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true)
    }
    // Nothing was written beyond the limit.
    expect(await t.store.db.selectFrom('consent_records').select('shop').execute()).toHaveLength(
      records.length,
    )
    // Another address is not affected, nor is the main API (its own listener, its own answers).
    expect((await send(port, 'GET', consumer(), '127.0.0.2')).status).toBe(200)
    const main = await (t.mainApp as NonNullable<typeof t.mainApp>).inject({
      method: 'GET',
      url: `${CONSENT}?${consumer()}`,
    })
    expect(main.statusCode).toBe(404)
    expect(main.json()).toMatchObject({ result: 'error', error: { code: 'ROUTE_NOT_FOUND' } })
  })
})

describe('consent API: flood limits per shop', () => {
  const PER_SHOP = 4
  let t: ConsentTestApp

  beforeAll(async () => {
    t = await buildConsentTestApp({
      rateLimit: { perAddress: 1000, perShop: PER_SHOP, windowSeconds: 60 },
    })
  })
  afterAll(() => t.close())

  const from = (remoteAddress: string, query: string) =>
    t.app.inject({ method: 'GET', url: `${CONSENT}?${query}`, remoteAddress })

  it(`answers ${PER_SHOP} requests for one shop from any addresses, then 429`, async () => {
    for (let i = 0; i < PER_SHOP; i++) {
      recordOf(await from(`10.0.0.${i + 1}`, consumer('busy.example')))
    }
    const over = await from('10.0.1.1', consumer('busy.example'))
    expectConsentError(over, 429, TOO_MANY)
    expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    // A POST without a shop in its query counts against the shop its token names.
    const post = await t.app.inject({
      method: 'POST',
      url: CONSENT,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({
        jwt: `e30.${Buffer.from(JSON.stringify({ consumerPartition: 'busy.example' })).toString('base64url')}.x`,
        optedOut: true,
      }),
      remoteAddress: '10.0.2.1',
    })
    expectConsentError(post, 429, TOO_MANY)
    // Other shops are not affected.
    recordOf(await from('10.0.1.1', consumer('quiet.example')))
  })
})

describe('consent records nobody chose for expire; the history stays', () => {
  const START = '2026-03-01T00:00:00.000Z'
  const TTL_DAYS = 30
  const clock = new ManualClock(START)
  let t: ConsentTestApp
  const shop = 'expiry.example'

  beforeAll(async () => {
    t = await buildConsentTestApp({ clock, unchosenTtlDays: TTL_DAYS })
  })
  afterAll(() => t.close())

  const digest = (email: string) => t.deps.consent.keys.digest(shop, email)
  const records = async () =>
    (
      await t.store.db
        .selectFrom('consent_records')
        .select('consumer_digest')
        .where('shop', '=', shop)
        .execute()
    ).map((r) => r.consumer_digest)
  const history = () =>
    t.store.db
      .selectFrom('consent_events')
      .selectAll()
      .where('shop', '=', shop)
      .orderBy('id')
      .execute()

  it('removes an unchosen record untouched for the TTL, keeps chosen, read and opted-out ones', async () => {
    const q = (email: string) => emailQuery(email, shop)
    recordOf(await t.get(q('idle@example.com')))
    recordOf(await t.get(q('reader@example.com')))
    const chosen = recordOf(await t.get(q('chosen@example.com')))
    recordOf(await t.post({ jwt: chosen.jwt, consentAnalytics: true }))
    const optedOut = recordOf(await t.get(q('optout@example.com')))
    recordOf(await t.post({ jwt: optedOut.jwt, optedOut: true }))
    const before = await history()

    // One millisecond short of the TTL: nothing goes. The reader comes back on day 20.
    clock.set(new Date(new Date(START).getTime() + 20 * DAY))
    recordOf(await t.get(q('reader@example.com')))
    clock.set(new Date(new Date(START).getTime() + TTL_DAYS * DAY - 1))
    expect(await t.deps.consent.pruneUnchosen()).toBe(0)
    expect(await records()).toHaveLength(4)

    // At the TTL the idle record goes; the reader's was touched on day 20 and stays.
    clock.set(new Date(new Date(START).getTime() + TTL_DAYS * DAY))
    expect(await t.deps.consent.pruneUnchosen()).toBe(1)
    expect(await records()).not.toContain(digest('idle@example.com'))
    expect(await records()).toHaveLength(3)

    // Much later the reader's goes too; a choice (even one that lapsed) or an opt-out never does.
    clock.set(new Date(new Date(START).getTime() + 400 * DAY))
    expect(await t.deps.consent.pruneUnchosen()).toBe(1)
    expect((await records()).sort()).toEqual(
      [digest('chosen@example.com'), digest('optout@example.com')].sort(),
    )

    // The history: every earlier row exactly as it was, plus one `expired` per removed record.
    const after = await history()
    expect(after.slice(0, before.length)).toEqual(before)
    const added = after.slice(before.length)
    expect(added.map((e) => [e.action, e.consumer_digest])).toEqual([
      ['expired', digest('idle@example.com')],
      ['expired', digest('reader@example.com')],
    ])
    expect(added[0]).toMatchObject({
      at: new Date(new Date(START).getTime() + TTL_DAYS * DAY).toISOString(),
      provider: 'email',
      privacy_center_id: 'pc-1',
      changes: '{}',
    })
  })

  it('a consumer who comes back gets a new record; the export still shows the whole story', async () => {
    const email = 'idle@example.com'
    const again = recordOf(await t.get(emailQuery(email, shop)))
    expect(again).toMatchObject({ isExisting: false, implicit: true })
    const chunks: Buffer[] = []
    const { PassThrough } = await import('node:stream')
    const out = new PassThrough()
    out.on('data', (c: Buffer) => chunks.push(c))
    await writeExport(
      t.store.db,
      t.deps.consent.keys,
      { shop, format: 'jsonl', identifiers: true, consumer: email },
      out,
    )
    out.end()
    const lines = Buffer.concat(chunks)
      .toString('utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => l.action)).toEqual(['created', 'expired', 'created'])
    expect(new Set(lines.map((l) => l.consumer))).toEqual(new Set([email]))
  })

  it('removes them page by page across the whole table, sparing chosen ones in between', async () => {
    const bulkShop = 'bulk.example'
    clock.set(START)
    const at = new Date(START).toISOString()
    const rows = Array.from({ length: 1300 }, (_, i) => ({
      shop: bulkShop,
      consumer_digest: `digest-${String(i).padStart(5, '0')}`,
      consumer_sealed: 'sealed',
      consumer_kind: 'email',
      // Every third one has a choice in force.
      consent_analytics: i % 3 === 0 ? 1 : null,
      consent_advertising: null,
      consent_personalization: null,
      consent_targeted_advertising: null,
      opted_out: null,
      choice_at: i % 3 === 0 ? at : null,
      token_epoch: 0,
      last_provider: 'email',
      last_privacy_center_id: 'pc-1',
      last_client_id: null,
      created_at: at,
      updated_at: at,
    }))
    for (let i = 0; i < rows.length; i += 100)
      await t.store.db
        .insertInto('consent_records')
        .values(rows.slice(i, i + 100))
        .execute()
    clock.set(new Date(new Date(START).getTime() + TTL_DAYS * DAY))
    expect(await t.deps.consent.pruneUnchosen()).toBe(866)
    const left = await t.store.db
      .selectFrom('consent_records')
      .select('consumer_digest')
      .where('shop', '=', bulkShop)
      .execute()
    expect(left).toHaveLength(434)
    const expired = await t.store.db
      .selectFrom('consent_events')
      .select('consumer_digest')
      .where('shop', '=', bulkShop)
      .where('action', '=', 'expired')
      .execute()
    expect(expired).toHaveLength(866)
  })

  it('the listener prunes on its own timer and stops with the app', async () => {
    const own = new ManualClock(START)
    const other = await buildConsentTestApp({
      clock: own,
      unchosenTtlDays: 1,
      pruneIntervalMs: 20,
    })
    try {
      recordOf(await other.get(emailQuery('timer@example.com', shop)))
      const count = async () =>
        (await other.store.db.selectFrom('consent_records').select('shop').execute()).length
      own.advance(2 * DAY)
      const deadline = Date.now() + 5000
      while ((await count()) > 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20))
      expect(await count()).toBe(0)
    } finally {
      await other.close()
    }
  })
})
