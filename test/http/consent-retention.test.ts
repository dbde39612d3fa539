import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import {
  buildConsentTestApp,
  type ConsentTestApp,
  emailQuery,
  expectConsentError,
  recordOf,
} from '../helpers/consent.js'

const DAY = 86_400_000
const START = '2026-01-10T09:00:00.000Z'
const NO_RECORD = 'No valid consent record exists for the provided JWT'
let seq = 0

describe('retention: a choice lasts 180 days, opt-outs forever', () => {
  let t: ConsentTestApp
  const clock = new ManualClock(START)

  beforeAll(async () => {
    t = await buildConsentTestApp({ clock })
  })
  afterAll(() => t.close())

  /** A consumer who chose at START (clock reset there first). */
  async function chosen(choice: Record<string, boolean>) {
    clock.set(START)
    const q = emailQuery(`retention-${++seq}@example.com`)
    const { jwt } = recordOf(await t.get(q))
    recordOf(await t.post({ jwt, ...choice }))
    return { q, jwt }
  }

  const at = (days: number, ms = 0) =>
    clock.set(new Date(new Date(START).getTime() + days * DAY + ms))

  it('keeps the choice until the last millisecond of day 180', async () => {
    const { q, jwt } = await chosen({ consentAnalytics: true, consentAdvertising: false })
    at(180, -1)
    const read = recordOf(await t.get(q))
    expect(read).toMatchObject({
      consentAnalytics: true,
      consentAdvertising: false,
      implicit: false,
      isExisting: true,
    })
    // Its token still works then (and a POST would renew the choice: not done here).
    expect(read.jwt).not.toBe(jwt)
  })

  it('reads as unknown from day 180: a fresh record, a new token, the old one refused', async () => {
    const { q, jwt } = await chosen({ consentAnalytics: true, consentPersonalization: false })
    at(180)
    const read = recordOf(await t.get(q))
    expect(read).toMatchObject({
      consentAnalytics: null,
      consentAdvertising: null,
      consentPersonalization: null,
      consentTargetedAdvertising: null,
      optedOut: null,
      implicit: true,
      isExisting: false,
    })
    expectConsentError(await t.post({ jwt, consentAnalytics: true }), 404, NO_RECORD)
    // The new token works, and a second GET sees the record as existing.
    recordOf(await t.post({ jwt: read.jwt, consentAnalytics: false }))
    expect(recordOf(await t.get(q))).toMatchObject({ consentAnalytics: false, isExisting: true })
  })

  it('refuses the old token once lapsed, even before anyone reads the record again', async () => {
    const { jwt } = await chosen({ consentAdvertising: true })
    at(181)
    expectConsentError(await t.post({ jwt, consentAdvertising: true }), 404, NO_RECORD)
  })

  it('refuses a token handed out after the choice but before the lapse', async () => {
    const { q } = await chosen({ consentAnalytics: true })
    at(100)
    const midway = recordOf(await t.get(q)).jwt
    at(200)
    recordOf(await t.get(q))
    expectConsentError(await t.post({ jwt: midway, consentAnalytics: true }), 404, NO_RECORD)
  })

  it('restarts the 180 days with every explicit change', async () => {
    const { q, jwt } = await chosen({ consentAnalytics: true })
    at(150)
    recordOf(await t.post({ jwt, optedOut: false }))
    at(300)
    expect(recordOf(await t.get(q))).toMatchObject({ consentAnalytics: true, optedOut: false })
    at(330)
    expect(recordOf(await t.get(q))).toMatchObject({ consentAnalytics: null, optedOut: null })
  })

  it('never lapses the opt-outs: optedOut true and consentTargetedAdvertising false', async () => {
    const { q } = await chosen({
      consentAnalytics: true,
      consentAdvertising: true,
      consentTargetedAdvertising: false,
      optedOut: true,
    })
    for (const days of [180, 365, 3 * 365, 10 * 365]) {
      at(days)
      expect(recordOf(await t.get(q)), `day ${days}`).toMatchObject({
        consentAnalytics: null,
        consentAdvertising: null,
        consentTargetedAdvertising: false,
        optedOut: true,
        // The kept opt-outs are an explicit choice on an existing record.
        implicit: false,
        isExisting: true,
      })
    }
  })

  it('lets other values lapse: optedOut false and consentTargetedAdvertising true', async () => {
    const { q } = await chosen({ consentTargetedAdvertising: true, optedOut: false })
    at(180)
    expect(recordOf(await t.get(q))).toMatchObject({
      consentTargetedAdvertising: null,
      optedOut: null,
    })
  })

  it('never lapses a record nobody chose for: its token keeps working', async () => {
    clock.set(START)
    const q = emailQuery(`never-chosen-${++seq}@example.com`)
    const { jwt } = recordOf(await t.get(q))
    at(1000)
    expect(recordOf(await t.get(q))).toMatchObject({ implicit: true, isExisting: true })
    recordOf(await t.post({ jwt, consentAnalytics: true }))
  })

  it('keeps the lapsed choice in the history, with the moment it lapsed', async () => {
    const { q } = await chosen({ consentAnalytics: true, optedOut: true })
    at(400)
    recordOf(await t.get(q))
    at(3 * 365)
    recordOf(await t.get(q))
    const digest = t.deps.consent.keys.digest(q.shop, q.customer_email)
    const events = await t.store.db
      .selectFrom('consent_events')
      .selectAll()
      .where('shop', '=', q.shop)
      .where('consumer_digest', '=', digest)
      .orderBy('id')
      .execute()
    expect(events.map((e) => e.action)).toEqual(['created', 'updated', 'lapsed'])
    const [, updated, lapsed] = events as [unknown, (typeof events)[0], (typeof events)[0]]
    expect(JSON.parse(updated.state)).toMatchObject({ consentAnalytics: true, optedOut: true })
    expect(updated.at).toBe(START)
    expect(lapsed.at).toBe(new Date(new Date(START).getTime() + 180 * DAY).toISOString())
    expect(JSON.parse(lapsed.changes)).toEqual({ consentAnalytics: { from: true, to: null } })
    expect(JSON.parse(lapsed.state)).toMatchObject({ consentAnalytics: null, optedOut: true })
  })

  it('resets a lapsed record once when two reads race', async () => {
    const { q } = await chosen({ consentPersonalization: true })
    at(200)
    const reads = await Promise.all(Array.from({ length: 6 }, () => t.get(q)))
    for (const r of reads) expect(recordOf(r).consentPersonalization).toBeNull()
    const digest = t.deps.consent.keys.digest(q.shop, q.customer_email)
    const lapsed = await t.store.db
      .selectFrom('consent_events')
      .select('id')
      .where('shop', '=', q.shop)
      .where('consumer_digest', '=', digest)
      .where('action', '=', 'lapsed')
      .execute()
    expect(lapsed).toHaveLength(1)
  })
})

describe('retention edges', () => {
  let t: ConsentTestApp
  const clock = new ManualClock(START)

  beforeAll(async () => {
    t = await buildConsentTestApp({ clock })
  })
  afterAll(() => t.close())

  it('refuses a token handed out in the very second of the lapse, before it', async () => {
    const choiceAt = new Date('2026-01-10T09:00:00.500Z').getTime()
    clock.set(new Date(choiceAt))
    const q = emailQuery(`edge-${++seq}@example.com`)
    recordOf(await t.post({ jwt: recordOf(await t.get(q)).jwt, consentAnalytics: true }))
    clock.set(new Date(choiceAt + 180 * DAY - 300))
    const early = recordOf(await t.get(q)).jwt
    clock.set(new Date(choiceAt + 180 * DAY + 100))
    const after = recordOf(await t.get(q))
    expect(after.consentAnalytics).toBeNull()
    expectConsentError(await t.post({ jwt: early, consentAnalytics: true }), 404, NO_RECORD)
    recordOf(await t.post({ jwt: after.jwt, consentAnalytics: false }))
  })

  it('records a change after a lapse against where the consumer is now', async () => {
    clock.set(START)
    const email = `edge-${++seq}@example.com`
    const q = emailQuery(email)
    recordOf(await t.post({ jwt: recordOf(await t.get(q)).jwt, consentAnalytics: true }))
    clock.set(new Date(new Date(START).getTime() + 200 * DAY))
    const moved = { ...q, privacy_center_id: 'pc-moved' }
    recordOf(await t.post({ jwt: recordOf(await t.get(moved)).jwt, consentAnalytics: true }))
    const digest = t.deps.consent.keys.digest(q.shop as string, email)
    const events = await t.store.db
      .selectFrom('consent_events')
      .selectAll()
      .where('consumer_digest', '=', digest)
      .orderBy('at')
      .execute()
    expect(events.map((e) => e.action)).toEqual(['created', 'updated', 'lapsed', 'updated'])
    expect(events.at(-1)?.privacy_center_id).toBe('pc-moved')
  })

  it('counts the 100-character limits in characters, not UTF-16 units', async () => {
    clock.set(START)
    const ok = recordOf(
      await t.get({ ...emailQuery(`edge-${++seq}@example.com`), shop: '🛍'.repeat(100) }),
    )
    expect(ok.isExisting).toBe(false)
    const tooLong = await t.get({
      ...emailQuery(`edge-${++seq}@example.com`),
      shop: '🛍'.repeat(101),
    })
    expect(tooLong.statusCode).toBe(400)
  })

  it('answers a request too malformed to parse in its own shape, uncached', async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = t.app.server.address() as AddressInfo
    const answer = await new Promise<string>((resolve, reject) => {
      let text = ''
      const socket = connect(port, '127.0.0.1', () =>
        socket.write('GET /api/v1/cmp/consent HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n'),
      )
      socket.on('data', (chunk) => {
        text += chunk.toString()
      })
      socket.on('end', () => resolve(text))
      socket.on('error', reject)
    })
    expect(answer).toMatch(/^HTTP\/1\.1 400 /)
    expect(answer).toMatch(/\r\nCache-Control: no-store\r\n/i)
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toBe('{"error":"Bad request"}')
  })
})
