import { randomUUID } from 'node:crypto'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CATEGORIES, type Category } from '../../src/access/metering.js'
import { operationsConsumed } from '../../src/access/operations-consumed.js'
import { ManualClock } from '../../src/lib/clock.js'
import { Metrics } from '../../src/metrics/prometheus.js'
import { COUNT_FLUSH_MS } from '../../src/modules/metering/metering.service.js'
import { type Admin, b64, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import { optionForm } from '../helpers/search-fixtures.js'
import { testDialect } from '../helpers/store.js'

/**
 * Operations metering (issue 13, part 3): the spec's table "Operations (billing units
 * consumed)" line by line, per account and UTC day, exact under concurrency; the usage endpoint;
 * the daily quota at its edge; the totals in /metrics; the count each request carries for the
 * audit trail.
 */
const DAY = '2030-03-10'
const clock = new ManualClock(`${DAY}T12:00:00.000Z`)
const metrics = new Metrics()
/** What each answered request recorded for the audit trail, by request id. */
const recorded = new Map<string, unknown>()

let t: TestApp

beforeAll(async () => {
  t = await buildTestApp({
    clock,
    metrics: { metrics, serve: true },
    beforeReady: (app) =>
      app.addHook('onResponse', (req, _reply, done) => {
        recorded.set(req.id, operationsConsumed(req))
        done()
      }),
  })
})
afterAll(async () => t?.close())

/** One account with a vault, a schema, documents, users and a user schema to count against. */
async function fixture() {
  const admin = await t.newAccount()
  const auth = admin.api_key
  const vault = (
    await t.api.post('/v1/vaults', { auth, form: { name: `v-${randomUUID()}` } })
  ).json().vault.id as string
  const schemaRes = await t.api.post(`/v1/vaults/${vault}/schemas`, {
    auth,
    form: { schema: b64({ name: 'people', fields: [{ name: 'name', type: 'string' }] }) },
  })
  expect(schemaRes.statusCode, schemaRes.body).toBe(200)
  const schema = schemaRes.json().schema.id as string
  const docs: string[] = []
  // Three documents under the schema, one without.
  for (const [name, withSchema] of [
    ['ann', true],
    ['bob', true],
    ['cid', true],
    ['dan', false],
  ] as const) {
    const res = await t.api.post(`/v2/vaults/${vault}/documents`, {
      auth,
      json: { document: { name }, ...(withSchema ? { schema_id: schema } : {}) },
    })
    expect(res.statusCode, res.body).toBe(200)
    docs.push(res.json().document.id as string)
  }
  const us = await t.api.put(`/v1/accounts/${admin.account_id}/user_schema`, {
    auth,
    form: { schema: b64({ name: 'u', fields: [{ name: 'team', type: 'string' }] }) },
  })
  expect(us.statusCode, us.body).toBe(200)
  const users: string[] = []
  for (const username of ['m-1', 'm-2', 'm-3']) {
    const res = await t.api.post('/v1/users', {
      auth,
      form: { username, attributes: b64({ team: 'blue' }) },
    })
    expect(res.statusCode, res.body).toBe(200)
    users.push(res.json().user.id as string)
  }
  return { admin, auth, vault, schema, docs, users }
}

type Counts = Record<Category, number>

async function usage(admin: Admin, from = DAY, to = from) {
  const res = await t.api.get(`/v1/accounts/${admin.account_id}/usage`, {
    auth: admin.api_key,
    query: { from, to },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().usage as {
    from: string
    to: string
    days: { day: string; operations: Counts; total: number }[]
    totals: Counts
  }
}

const today = async (admin: Admin) => (await usage(admin)).totals

/** Runs `request`, expects `status`, and returns what it added to each category today. */
async function delta(
  admin: Admin,
  request: () => Promise<{ statusCode: number; body: string; headers: Record<string, unknown> }>,
  status = 200,
): Promise<Partial<Counts>> {
  const before = await today(admin)
  const res = await request()
  expect(res.statusCode, res.body).toBe(status)
  const after = await today(admin)
  const out: Partial<Counts> = {}
  for (const c of CATEGORIES) if (after[c] !== before[c]) out[c] = after[c] - before[c]
  return out
}

const searchBody = (option: Record<string, unknown>) => ({ multipart: optionForm(option) })

describe("metering: the spec's table, line by line", () => {
  let f: Awaited<ReturnType<typeof fixture>>
  beforeAll(async () => {
    f = await fixture()
  })

  it('GET /v2/users/{ids}: full=true one per user returned, full=false one', async () => {
    const ids = f.users.join(',')
    const get = (full?: string) => () =>
      t.api.get(`/v2/users/${ids}`, { auth: f.auth, ...(full ? { query: { full } } : {}) })
    expect(await delta(f.admin, get('true'))).toEqual({ user_read: 3 })
    expect(await delta(f.admin, get('false'))).toEqual({ user_read: 1 })
    expect(await delta(f.admin, get())).toEqual({ user_read: 1 })
    // One id not found: the request fails whole, and a failed request counts nothing.
    const missing = () =>
      t.api.get(`/v2/users/${f.users[0]},${randomUUID()}`, {
        auth: f.auth,
        query: { full: 'true' },
      })
    expect(await delta(f.admin, missing, 404)).toEqual({})
  })

  it('GET /v1/users: full=true one per user returned, full=false one', async () => {
    const list = (full: string) => () => t.api.get('/v1/users', { auth: f.auth, query: { full } })
    // The admin and the three users.
    expect(await delta(f.admin, list('true'))).toEqual({ user_read: 4 })
    expect(await delta(f.admin, list('false'))).toEqual({ user_read: 1 })
    // Only the users returned: a user who may read only itself gets one back.
    const self = await createUser(t, {
      auth: f.auth,
      policy: [{ Resources: ['User::$[id=self.id]'], Activities: 'R' }],
    })
    expect(
      await delta(f.admin, () =>
        t.api.get('/v1/users', { auth: self.apiKey, query: { full: 'true' } }),
      ),
    ).toEqual({ user_read: 1 })
  })

  it('GET documents by ids, v2 and v1: one per document returned', async () => {
    const [a, b, c] = f.docs
    const v2 = (ids: string[]) => () =>
      t.api.get(`/v2/vaults/${f.vault}/documents/${ids.join(',')}`, { auth: f.auth })
    const v1 = (ids: string[]) => () =>
      t.api.get(`/v1/vaults/${f.vault}/documents/${ids.join(',')}`, { auth: f.auth })
    expect(await delta(f.admin, v2([a, b, c] as string[]))).toEqual({ document_read: 3 })
    expect(await delta(f.admin, v2([a] as string[]))).toEqual({ document_read: 1 })
    expect(await delta(f.admin, v1([a, b] as string[]))).toEqual({ document_read: 2 })
    // The deprecated single read (bare base64 text) counts its one document.
    expect(await delta(f.admin, v1([c] as string[]))).toEqual({ document_read: 1 })
    // A missing id fails the request: nothing counted, in either version.
    const gone = [a as string, randomUUID()]
    expect(await delta(f.admin, v2(gone), 404)).toEqual({})
    expect(await delta(f.admin, v1(gone), 404)).toEqual({})
  })

  it('list documents and list documents with schema: full=true one per document returned, full=false one', async () => {
    const list = (query: Record<string, string>, schema?: string) => () =>
      t.api.get(
        schema
          ? `/v1/vaults/${f.vault}/schemas/${schema}/documents`
          : `/v1/vaults/${f.vault}/documents`,
        { auth: f.auth, query },
      )
    expect(await delta(f.admin, list({ full: 'true' }))).toEqual({ document_list: 4 })
    expect(await delta(f.admin, list({ full: 'false' }))).toEqual({ document_list: 1 })
    expect(await delta(f.admin, list({}))).toEqual({ document_list: 1 })
    // Returned, not existing: a page of two counts two.
    expect(await delta(f.admin, list({ full: 'true', per_page: '2' }))).toEqual({
      document_list: 2,
    })
    // A page past the end returns nothing: zero operations with full=true.
    expect(await delta(f.admin, list({ full: 'true', page: '9' }))).toEqual({})
    expect(await delta(f.admin, list({ full: 'true' }, f.schema))).toEqual({ document_list: 3 })
    expect(await delta(f.admin, list({ full: 'false' }, f.schema))).toEqual({ document_list: 1 })
  })

  it('search documents: full_document true one plus one per document returned, false one', async () => {
    const option = (full_document: boolean, value = '*') => ({
      schema_id: f.schema,
      filter: { name: { type: 'wildcard', value } },
      full_document,
    })
    const search = (o: unknown) => () =>
      t.api.post(`/v1/vaults/${f.vault}/search`, { auth: f.auth, ...searchBody(o as never) })
    expect(await delta(f.admin, search(option(true)))).toEqual({ document_search: 4 })
    expect(await delta(f.admin, search(option(false)))).toEqual({ document_search: 1 })
    // Nothing found: one all the same.
    expect(await delta(f.admin, search(option(true, 'zzz*')))).toEqual({ document_search: 1 })
    // The legacy spellings count as the search they are.
    const query = new URLSearchParams({ search_option: b64(option(true, 'a*')) }).toString()
    expect(
      await delta(f.admin, () => t.api.get(`/v1/vaults/${f.vault}/?${query}`, { auth: f.auth })),
    ).toEqual({ document_search: 2 })
    expect(
      await delta(f.admin, () =>
        t.api.post(`/v1/vaults/${f.vault}/`, { auth: f.auth, ...searchBody(option(false)) }),
      ),
    ).toEqual({ document_search: 1 })
    // A refused search (bad option) counts nothing.
    expect(await delta(f.admin, search({ filter: {}, schema_id: f.schema }), 400)).toEqual({})
  })

  it('search users: full_document true one plus one per user returned, false one', async () => {
    const option = (full_document: boolean) => ({
      filter: { team: { type: 'eq', value: 'blue' } },
      full_document,
    })
    const search = (o: unknown) => () =>
      t.api.post('/v1/users/search', { auth: f.auth, ...searchBody(o as never) })
    expect(await delta(f.admin, search(option(true)))).toEqual({ user_search: 4 })
    expect(await delta(f.admin, search(option(false)))).toEqual({ user_search: 1 })
  })

  it('other routes count nothing, and each request carries its count for the audit trail', async () => {
    const reads = [
      () => t.api.get(`/v1/vaults/${f.vault}`, { auth: f.auth }),
      () => t.api.get(`/v1/users/${f.users[0]}`, { auth: f.auth, query: { full: 'true' } }),
      () => t.api.get(`/v1/vaults/${f.vault}/schemas`, { auth: f.auth }),
      () => t.api.get('/v1/auth/me', { auth: f.auth }),
      () => t.api.post(`/v2/vaults/${f.vault}/documents`, { auth: f.auth, json: { document: {} } }),
    ]
    for (const request of reads) expect(await delta(f.admin, request)).toEqual({})

    const read = await t.api.get(`/v2/vaults/${f.vault}/documents/${f.docs[0]},${f.docs[1]}`, {
      auth: f.auth,
    })
    expect(recorded.get(read.json().transaction_id)).toEqual({
      category: 'document_read',
      count: 2,
    })
    const plain = await t.api.get(`/v1/vaults/${f.vault}`, { auth: f.auth })
    expect(recorded.get(plain.json().transaction_id)).toBeUndefined()
    const failed = await t.api.get(`/v2/vaults/${f.vault}/documents/${randomUUID()}`, {
      auth: f.auth,
    })
    expect(failed.statusCode).toBe(404)
    expect(recorded.get(failed.json().transaction_id)).toBeUndefined()
  })
})

describe('metering: a count that cannot be stored yet', () => {
  it('is kept and stored once the database takes it: the read is served, nothing lost', async () => {
    const f = await fixture()
    const db = t.deps.store.db
    const stored = async () =>
      Number(
        (
          await db
            .selectFrom('operation_counts')
            .select((eb) => eb.fn.sum<string | number | null>('n').as('n'))
            .where('account_id', '=', f.admin.account_id)
            .executeTakeFirst()
        )?.n ?? 0,
      )
    await t.deps.metering.flush()
    const before = await stored()
    const refuse =
      testDialect === 'postgres'
        ? [
            sql`create function refuse_count() returns trigger language plpgsql as $$ begin raise exception 'refused'; end $$`,
            sql`create trigger refuse_count before insert on operation_counts for each row execute function refuse_count()`,
          ]
        : [
            sql`create trigger refuse_count before insert on operation_counts begin select raise(abort, 'refused'); end`,
          ]
    const allow =
      testDialect === 'postgres'
        ? [sql`drop trigger refuse_count on operation_counts`, sql`drop function refuse_count()`]
        : [sql`drop trigger refuse_count`]
    for (const statement of refuse) await statement.execute(db)
    try {
      const res = await t.api.get(`/v2/vaults/${f.vault}/documents/${f.docs[0]},${f.docs[1]}`, {
        auth: f.auth,
      })
      expect(res.statusCode, res.body).toBe(200)
      await expect(t.deps.metering.flush()).rejects.toThrow()
      expect(await stored()).toBe(before)
    } finally {
      for (const statement of allow) await statement.execute(db)
    }
    await t.deps.metering.flush()
    expect(await stored()).toBe(before + 2)
  })

  it('is stored within the flush interval without anyone asking', async () => {
    const f = await fixture()
    await t.deps.metering.flush()
    const res = await t.api.get(`/v2/vaults/${f.vault}/documents/${f.docs[0]}`, { auth: f.auth })
    expect(res.statusCode).toBe(200)
    await new Promise((r) => setTimeout(r, COUNT_FLUSH_MS * 3))
    const row = await t.deps.store.db
      .selectFrom('operation_counts')
      .select('n')
      .where('account_id', '=', f.admin.account_id)
      .where('category', '=', 'document_read')
      .executeTakeFirst()
    expect(Number(row?.n)).toBe(1)
  })
})

describe('metering: exact under concurrency', () => {
  it('many parallel reads of one account add up exactly', async () => {
    const f = await fixture()
    const before = await today(f.admin)
    const url = `/v2/vaults/${f.vault}/documents/${f.docs[0]},${f.docs[1]}`
    const lists = `/v1/vaults/${f.vault}/documents`
    const answers = await Promise.all([
      ...Array.from({ length: 60 }, () => t.api.get(url, { auth: f.auth })),
      ...Array.from({ length: 30 }, () =>
        t.api.get(lists, { auth: f.auth, query: { full: 'true' } }),
      ),
    ])
    for (const res of answers) expect(res.statusCode, res.body).toBe(200)
    const after = await today(f.admin)
    expect(after.document_read - before.document_read).toBe(120)
    expect(after.document_list - before.document_list).toBe(120)
  })
})

describe('metering: UTC days', () => {
  it('counts each request on the UTC day it was answered', async () => {
    const f = await fixture()
    const read = () => t.api.get(`/v2/vaults/${f.vault}/documents/${f.docs[0]}`, { auth: f.auth })
    try {
      clock.set('2030-03-11T23:59:59.900Z')
      expect((await read()).statusCode).toBe(200)
      expect((await read()).statusCode).toBe(200)
      clock.set('2030-03-12T00:00:00.000Z')
      expect((await read()).statusCode).toBe(200)
      const u = await usage(f.admin, '2030-03-10', '2030-03-13')
      expect(u.days.map((d) => [d.day, d.operations.document_read, d.total])).toEqual([
        ['2030-03-10', 0, 0],
        ['2030-03-11', 2, 2],
        ['2030-03-12', 1, 1],
        ['2030-03-13', 0, 0],
      ])
      expect(u.totals.document_read).toBe(3)
      expect((await usage(f.admin, '2030-03-12', '2030-03-12')).totals.document_read).toBe(1)
    } finally {
      clock.set(`${DAY}T12:00:00.000Z`)
    }
  })
})

describe('metering: GET /v1/accounts/{account_id}/usage', () => {
  const get = (
    admin: Admin,
    query: Record<string, string>,
    auth = admin.api_key,
    id = admin.account_id,
  ) => t.api.get(`/v1/accounts/${id}/usage`, { auth, query })

  it('answers every category of every day, zeroes included, for a new account', async () => {
    const admin = await t.newAccount()
    const u = await usage(admin, '2030-02-27', '2030-03-01')
    const zero = Object.fromEntries(CATEGORIES.map((c) => [c, 0]))
    expect(u).toEqual({
      from: '2030-02-27',
      to: '2030-03-01',
      days: ['2030-02-27', '2030-02-28', '2030-03-01'].map((day) => ({
        day,
        operations: zero,
        total: 0,
      })),
      totals: zero,
    })
  })

  it('refuses bad dates and ranges with a 400 naming the field', async () => {
    const admin = await t.newAccount()
    const cases: [Record<string, string>, string][] = [
      [{ to: DAY }, 'from'],
      [{ from: DAY }, 'to'],
      [{ from: '2030-02-30', to: DAY }, 'from'],
      [{ from: DAY, to: '2030-3-1' }, 'to'],
      [{ from: 'yesterday', to: DAY }, 'from'],
      [{ from: '2030-03-10T00:00:00Z', to: DAY }, 'from'],
      [{ from: '2030-03-11', to: '2030-03-10' }, 'to'],
      // 367 days, both ends included.
      [{ from: '2029-03-10', to: '2030-03-11' }, 'to'],
    ]
    for (const [query, field] of cases) {
      const res = await get(admin, query)
      expect(res.statusCode, `${JSON.stringify(query)} ${res.body}`).toBe(400)
      expect(errorOf(res).message.startsWith(`${field} `), res.body).toBe(true)
    }
    // 366 days is the edge: accepted.
    expect((await usage(admin, '2029-03-11', '2030-03-11')).days).toHaveLength(366)
  })

  it('is the caller’s own account only, for whoever may read its settings, never with a SAT', async () => {
    const a = await t.newAccount()
    const b = await t.newAccount()
    const other = await get(a, { from: DAY, to: DAY }, a.api_key, b.account_id)
    expect(other.statusCode, other.body).toBe(404)
    // A user without R on Account::<id>::Settings.
    const plain = await createUser(t, {
      auth: a.api_key,
      policy: [{ Resources: ['Vault::.*'], Activities: 'R' }],
    })
    const denied = await get(a, { from: DAY, to: DAY }, plain.apiKey)
    expect(denied.statusCode, denied.body).toBe(401)
    expect(errorOf(denied).code).toBe('PERMISSION_DENIED')
    const reader = await createUser(t, {
      auth: a.api_key,
      policy: [{ Resources: [`Account::${a.account_id}::Settings`], Activities: 'R' }],
    })
    expect((await get(a, { from: DAY, to: DAY }, reader.apiKey)).statusCode).toBe(200)
    expect((await get(a, { from: DAY, to: DAY }, reader.accessToken)).statusCode).toBe(200)
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: a.api_key,
      json: {
        name: 'sat',
        policy: [{ Resources: ['Account::.*::Settings'], Activities: 'R' }],
        not_valid_after: new Date(clock.now().getTime() + 3_600_000).toISOString(),
      },
    })
    expect(sat.statusCode, sat.body).toBe(200)
    const viaSat = await t.api.get(`/v1/accounts/${a.account_id}/usage`, {
      basic: sat.json().scoped_access_token.http_auth,
      query: { from: DAY, to: DAY },
    })
    expect(viaSat.statusCode, viaSat.body).toBe(401)
    expect(errorOf(viaSat).code).toBe('CREDENTIAL_NOT_ALLOWED')
  })
})

describe('metering: the daily quota', () => {
  const setQuota = (admin: Admin, quota: unknown) =>
    t.api.put(`/v1/accounts/${admin.account_id}/settings`, {
      auth: admin.api_key,
      json: { daily_operations_quota: quota },
    })

  it('is a setting: null or an integer from 1 to 10^12, a 400 naming it otherwise', async () => {
    const admin = await t.newAccount()
    for (const bad of [0, -1, 1.5, '10', true, 1_000_000_000_001]) {
      const res = await setQuota(admin, bad)
      expect(res.statusCode, res.body).toBe(400)
      expect(errorOf(res).message).toMatch(/^daily_operations_quota /)
    }
    for (const good of [1, 1_000_000_000_000, null]) {
      const res = await setQuota(admin, good)
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json().settings.daily_operations_quota).toBe(good)
    }
  })

  it('the request that reaches the quota succeeds, the next is 429 until UTC midnight', async () => {
    const f = await fixture()
    expect((await setQuota(f.admin, 5)).statusCode).toBe(200)
    const read = (n: number) =>
      t.api.get(`/v2/vaults/${f.vault}/documents/${f.docs.slice(0, n).join(',')}`, {
        auth: f.auth,
      })
    try {
      clock.set(`${DAY}T23:00:00.000Z`)
      expect((await read(3)).statusCode).toBe(200) // 3 of 5
      expect((await read(2)).statusCode).toBe(200) // 5 of 5: reaches it
      const refused = await read(1)
      expect(refused.statusCode, refused.body).toBe(429)
      expect(errorOf(refused)).toEqual({
        type: 'rate_limit_error',
        code: 'OPERATIONS_QUOTA_EXCEEDED',
        message: expect.stringContaining('daily_operations_quota'),
      })
      expect(refused.headers['retry-after']).toBe('3600')
      // Every metered route is refused; the others still work.
      const list = await t.api.get('/v1/users', { auth: f.auth })
      expect(list.statusCode).toBe(429)
      expect((await t.api.get(`/v1/vaults/${f.vault}`, { auth: f.auth })).statusCode).toBe(200)
      const create = await t.api.post(`/v2/vaults/${f.vault}/documents`, {
        auth: f.auth,
        json: { document: {} },
      })
      expect(create.statusCode).toBe(200)
      expect((await usage(f.admin)).days[0]?.total).toBe(5)
      // A new UTC day, a new allowance.
      clock.set(`2030-03-11T00:00:00.000Z`)
      expect((await read(1)).statusCode).toBe(200)
      // Raising the quota lets the day's requests through again at once.
      clock.set(`${DAY}T23:30:00.000Z`)
      expect((await read(1)).statusCode).toBe(429)
      expect((await setQuota(f.admin, 6)).statusCode).toBe(200)
      expect((await read(1)).statusCode).toBe(200)
      expect((await read(1)).statusCode).toBe(429)
    } finally {
      clock.set(`${DAY}T12:00:00.000Z`)
    }
  })

  it('a request that starts under the quota is served whole (the overshoot is its own count)', async () => {
    const f = await fixture()
    expect((await setQuota(f.admin, 4)).statusCode).toBe(200)
    const read = (n: number) =>
      t.api.get(`/v2/vaults/${f.vault}/documents/${f.docs.slice(0, n).join(',')}`, {
        auth: f.auth,
      })
    expect((await read(3)).statusCode).toBe(200)
    expect((await read(4)).statusCode).toBe(200) // 3 < 4: served, the day ends at 7
    expect((await read(1)).statusCode).toBe(429)
    expect((await today(f.admin)).document_read).toBe(7)
  })
})

describe('metering: /metrics', () => {
  it('exposes the totals by category, without any account label', async () => {
    const f = await fixture()
    const value = async (category: Category) => {
      const text = await metrics.text()
      const line = text
        .split('\n')
        .find((l) => l.startsWith(`coffer_operations_consumed_total{category="${category}"}`))
      return Number(line?.split(' ')[1])
    }
    const before = await value('document_read')
    const res = await t.api.get(`/v2/vaults/${f.vault}/documents/${f.docs.join(',')}`, {
      auth: f.auth,
    })
    expect(res.statusCode).toBe(200)
    expect((await value('document_read')) - before).toBe(4)
    const text = await metrics.text()
    for (const c of CATEGORIES)
      expect(text).toContain(`coffer_operations_consumed_total{category="${c}"}`)
    expect(text).not.toContain(f.admin.account_id)
    const served = await t.api.get('/metrics')
    expect(served.body).toContain('coffer_operations_consumed_total{category="document_read"}')
  })
})
