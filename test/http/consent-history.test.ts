import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import {
  csvCell,
  type ExportOptions,
  writeExport,
} from '../../src/modules/consent/consent-export.js'
import {
  buildConsentTestApp,
  type ConsentTestApp,
  emailQuery,
  recordOf,
  TEST_CONSENT_SECRET,
} from '../helpers/consent.js'

const START = '2026-02-01T00:00:00.000Z'
const V4 = '3b241101-e2bb-4255-8caf-4136c566a962'
const logLines: string[] = []

describe('proof of consent: the history', () => {
  let t: ConsentTestApp
  const clock = new ManualClock(START)

  beforeAll(async () => {
    t = await buildConsentTestApp({ clock, logStream: { write: (line) => logLines.push(line) } })
  })
  afterAll(() => t.close())

  const events = (shop: string) =>
    t.store.db
      .selectFrom('consent_events')
      .selectAll()
      .where('shop', '=', shop)
      .orderBy('id')
      .execute()

  it('records every change with time, provider, shop, privacy center, fields, GPC and user agent', async () => {
    const shop = 'history-1.example'
    const q = emailQuery('Grace@Example.com', shop, { client_id: V4 })
    const { jwt } = recordOf(await t.get(q, { 'user-agent': 'Browser/1.0', 'sec-gpc': '1' }))
    clock.advance(60_000)
    recordOf(
      await t.post(
        { jwt, consentAnalytics: true, consentAdvertising: false },
        { headers: { 'user-agent': 'Browser/1.1' } },
      ),
    )
    clock.advance(60_000)
    // Reads add nothing to the history.
    recordOf(await t.get(q))
    recordOf(await t.get(q))
    recordOf(
      await t.post(
        { jwt, consentAdvertising: true, optedOut: true },
        { headers: { 'sec-gpc': '1' } },
      ),
    )

    const rows = await events(shop)
    expect(rows.map((r) => r.action)).toEqual(['created', 'updated', 'updated'])
    const [created, first, second] = rows as [(typeof rows)[0], (typeof rows)[0], (typeof rows)[0]]
    expect(created).toMatchObject({
      at: START,
      provider: 'email',
      privacy_center_id: 'pc-1',
      client_id: V4,
      gpc: 1,
      user_agent: 'Browser/1.0',
      changes: '{}',
    })
    expect(first).toMatchObject({
      at: '2026-02-01T00:01:00.000Z',
      provider: 'email',
      privacy_center_id: 'pc-1',
      client_id: V4,
      gpc: 0,
      user_agent: 'Browser/1.1',
    })
    expect(JSON.parse(first.changes)).toEqual({
      consentAnalytics: { from: null, to: true },
      consentAdvertising: { from: null, to: false },
    })
    expect(JSON.parse(second.changes)).toEqual({
      consentAdvertising: { from: false, to: true },
      optedOut: { from: null, to: true },
    })
    expect(JSON.parse(second.state)).toEqual({
      consentAnalytics: true,
      consentAdvertising: true,
      consentPersonalization: null,
      consentTargetedAdvertising: null,
      optedOut: true,
    })
    expect(second.gpc).toBe(1)
  })

  it('records a re-confirmed value as sent, even when unchanged', async () => {
    const shop = 'history-2.example'
    const { jwt } = recordOf(await t.get(emailQuery('same@example.com', shop)))
    recordOf(await t.post({ jwt, optedOut: true }))
    recordOf(await t.post({ jwt, optedOut: true }))
    const rows = await events(shop)
    expect(rows.map((r) => JSON.parse(r.changes))).toEqual([
      {},
      { optedOut: { from: null, to: true } },
      { optedOut: { from: true, to: true } },
    ])
  })

  it('records where the consumer was last seen for later changes', async () => {
    const shop = 'history-3.example'
    const q = emailQuery('moves@example.com', shop)
    const { jwt } = recordOf(await t.get(q))
    recordOf(await t.get({ ...q, privacy_center_id: 'pc-2', client_id: V4 }))
    recordOf(await t.post({ jwt, consentPersonalization: true }))
    const rows = await events(shop)
    expect(rows[1]).toMatchObject({ privacy_center_id: 'pc-2', client_id: V4, provider: 'email' })
  })

  it('keeps one created event when first reads race, and every update when writes race', async () => {
    const shop = 'history-4.example'
    const q = emailQuery('racer@example.com', shop)
    const firsts = (await Promise.all(Array.from({ length: 8 }, () => t.get(q)))).map(recordOf)
    expect(firsts.filter((r) => !r.isExisting)).toHaveLength(1)
    const { jwt } = firsts[0] as (typeof firsts)[0]
    const fields = [
      'consentAnalytics',
      'consentAdvertising',
      'consentPersonalization',
      'consentTargetedAdvertising',
      'optedOut',
    ]
    await Promise.all(fields.map((f) => t.post({ jwt, [f]: true })))
    const rows = await events(shop)
    expect(rows.filter((r) => r.action === 'created')).toHaveLength(1)
    expect(rows.filter((r) => r.action === 'updated')).toHaveLength(fields.length)
    // Nothing lost: every field ends true, and the last event's state says so.
    const final = recordOf(await t.get(q))
    for (const f of fields) expect(final[f as 'optedOut']).toBe(true)
    expect(JSON.parse((rows[rows.length - 1] as (typeof rows)[0]).state)).toEqual(
      Object.fromEntries(fields.map((f) => [f, true])),
    )
  })

  it('never rewrites an entry: earlier rows stay byte-identical as changes pile up', async () => {
    const shop = 'history-5.example'
    const q = emailQuery('stable@example.com', shop)
    const { jwt } = recordOf(await t.get(q))
    recordOf(await t.post({ jwt, consentAnalytics: true }))
    const before = await events(shop)
    for (const value of [false, null, true])
      recordOf(await t.post({ jwt, consentAnalytics: value }))
    clock.advance(200 * 86_400_000)
    recordOf(await t.get(q)) // lapses
    const after = await events(shop)
    expect(after.slice(0, before.length)).toEqual(before)
    expect(after.map((r) => r.action)).toEqual([
      'created',
      'updated',
      'updated',
      'updated',
      'updated',
      'lapsed',
    ])
  })

  it('has no UPDATE or DELETE of the history anywhere in the code', () => {
    const files: string[] = []
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name)
        if (statSync(path).isDirectory()) walk(path)
        else if (path.endsWith('.ts') && !path.endsWith('.test.ts')) files.push(path)
      }
    }
    walk('src')
    const writers = files.filter((f) => /consent_events/.test(readFileSync(f, 'utf8')))
    // Only the repository (and the migration that creates the table) name the table.
    expect(writers.sort()).toEqual(
      [
        'src/modules/consent/consent.repo.ts',
        'src/store/migrations/0007_consent.ts',
        'src/store/schema.ts',
      ].sort(),
    )
    const repo = readFileSync('src/modules/consent/consent.repo.ts', 'utf8')
    expect(repo).not.toMatch(/(updateTable|deleteFrom)\(\s*'consent_events/)
    expect(repo).not.toMatch(/(update|delete from)\s+"?consent_events/i)
  })

  it('stores no email or customer id in plaintext, and never logs them', async () => {
    const shop = 'history-6.example'
    const email = 'private.person@example.com'
    const { jwt } = recordOf(await t.get(emailQuery(email, shop), { 'user-agent': 'UA' }))
    recordOf(await t.post({ jwt, optedOut: true }))
    recordOf(
      await t.get({
        provider: 'storefront',
        shop,
        privacy_center_id: 'p',
        logged_in_customer_id: '987654321',
      }),
    )
    const dump = JSON.stringify([
      await t.store.db.selectFrom('consent_records').selectAll().where('shop', '=', shop).execute(),
      await events(shop),
    ])
    expect(dump).not.toContain('private.person')
    expect(dump).not.toContain('987654321')
    expect(dump).not.toContain(TEST_CONSENT_SECRET)
    const log = logLines.join('')
    expect(log).toContain('consent request')
    expect(log).not.toContain('private.person')
    expect(log).not.toContain('987654321')
    expect(log).not.toContain('customer_email')
    expect(log).not.toContain(jwt)
  })
})

describe('the export', () => {
  let t: ConsentTestApp
  const clock = new ManualClock(START)
  const shop = 'export.example'

  beforeAll(async () => {
    t = await buildConsentTestApp({ clock })
    const a = recordOf(
      await t.get(emailQuery('Ada@Example.com', shop), { 'user-agent': '=HYPERLINK("x")' }),
    ).jwt
    clock.advance(1000)
    recordOf(
      await t.post(
        { jwt: a, consentAnalytics: true, optedOut: false },
        { headers: { 'sec-gpc': '1' } },
      ),
    )
    const b = recordOf(await t.get(emailQuery('bob@example.com', shop))).jwt
    recordOf(await t.post({ jwt: b, optedOut: true }))
    recordOf(await t.get(emailQuery('ada@example.com', 'elsewhere.example')))
  })
  afterAll(() => t.close())

  async function run(options: Partial<ExportOptions>): Promise<string> {
    const out = new PassThrough()
    const chunks: Buffer[] = []
    out.on('data', (c: Buffer) => chunks.push(c))
    await writeExport(
      t.store.db,
      t.deps.consent.keys,
      { shop, format: 'csv', identifiers: false, ...options },
      out,
    )
    out.end()
    return Buffer.concat(chunks).toString('utf8')
  }

  it('writes JSON lines of the shop’s history only, consumers pseudonymous by default', async () => {
    const lines = (await run({ format: 'jsonl' }))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => l.action)).toEqual(['created', 'updated', 'created', 'updated'])
    expect(new Set(lines.map((l) => l.shop))).toEqual(new Set([shop]))
    expect(JSON.stringify(lines)).not.toContain('ada@')
    const refs = new Set(lines.map((l) => l.consumer_ref))
    expect(refs.size).toBe(2)
    expect(lines[1]).toEqual({
      at: '2026-02-01T00:00:01.000Z',
      shop,
      consumer_ref: t.deps.consent.keys.digest(shop, 'ada@example.com'),
      consumer_kind: 'email',
      action: 'updated',
      provider: 'email',
      privacy_center_id: 'pc-1',
      client_id: null,
      changes: { consentAnalytics: { from: null, to: true }, optedOut: { from: null, to: false } },
      state: {
        consentAnalytics: true,
        consentAdvertising: null,
        consentPersonalization: null,
        consentTargetedAdvertising: null,
        optedOut: false,
      },
      cookie_choice_valid_until: '2026-07-31T00:00:01.000Z',
      gpc: true,
      user_agent: 'lightMyRequest',
    })
  })

  it('shows identifiers only when asked, and filters to one consumer', async () => {
    const all = (await run({ format: 'jsonl', identifiers: true }))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(all.map((l) => l.consumer)).toEqual([
      'ada@example.com',
      'ada@example.com',
      'bob@example.com',
      'bob@example.com',
    ])
    const ada = (await run({ format: 'jsonl', consumer: ' ADA@example.com' }))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(ada).toHaveLength(2)
    expect(
      ada.every((l) => l.consumer_ref === t.deps.consent.keys.digest(shop, 'ada@example.com')),
    ).toBe(true)
    expect(await run({ format: 'jsonl', consumer: 'nobody@example.com' })).toBe('')
  })

  it('writes CSV with a header, one row per entry, formulas defused', async () => {
    const rows = (await run({ format: 'csv' })).split('\r\n').filter((r) => r !== '')
    expect(rows[0]).toBe(
      'at,shop,consumer_ref,consumer_kind,action,provider,privacy_center_id,client_id,changes,consentAnalytics,consentAdvertising,consentPersonalization,consentTargetedAdvertising,optedOut,cookie_choice_valid_until,gpc,user_agent',
    )
    expect(rows).toHaveLength(5)
    expect(rows[1]).toContain(`'=HYPERLINK(""x"")`)
    expect(rows[2]).toContain(
      '"{""consentAnalytics"":{""from"":null,""to"":true},""optedOut"":{""from"":null,""to"":false}}",true,,,,false,2026-07-31T00:00:01.000Z,true,',
    )
    const withIds = (await run({ format: 'csv', identifiers: true })).split('\r\n')
    expect(withIds[0]).toContain('consumer_ref,consumer,consumer_kind')
    expect(withIds[1]).toContain(',ada@example.com,email,created,')
  })

  it('quotes CSV cells per RFC 4180', () => {
    expect(csvCell(null)).toBe('')
    expect(csvCell(true)).toBe('true')
    expect(csvCell('plain')).toBe('plain')
    expect(csvCell('a,b')).toBe('"a,b"')
    expect(csvCell('say "hi"')).toBe('"say ""hi"""')
    expect(csvCell('line\nbreak')).toBe('"line\nbreak"')
    expect(csvCell(' padded')).toBe('" padded"')
    for (const risky of ['=1+1', '+1', '-1', '@SUM(A1)', '\tx'])
      expect(csvCell(risky).replace(/^"/, '')).toMatch(/^'/)
  })
})
