import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { buildTestApp, errorOf, type TestApp } from '../helpers/app.js'

/**
 * SATs cannot flood storage (issue 10, finding 8): policies are at most 64 KiB, a SAT mints only
 * with C on `ScopedAccessToken::` in its own policy, at most 100 live children per SAT and 1,000
 * live SATs per user.
 */
const START = '2030-01-01T00:00:00.000Z'
const clock = new ManualClock(START)
let t: TestApp

type Creds = { username: string; password: string }
const MINT: PolicyStatement = { Resources: ['ScopedAccessToken::'], Activities: 'C' }
const READ: PolicyStatement = { Resources: ['Vault::'], Activities: 'R' }
const inMinutes = (m: number) => new Date(clock.now().getTime() + m * 60_000).toISOString()

beforeAll(async () => {
  t = await buildTestApp({ clock })
})
afterAll(() => t.close())
beforeEach(() => clock.set(START))

function mint(by: { auth?: string; basic?: Creds }, body: Record<string, unknown> = {}) {
  return t.api.post('/v1/scoped_access_tokens', {
    ...by,
    json: { name: 'sat', policy: [READ], not_valid_after: inMinutes(60), ...body },
  })
}

async function sat(policy: PolicyStatement[], by: { auth?: string; basic?: Creds } = {}) {
  const res = await mint(by.basic ? by : { auth: t.admin.api_key }, { policy })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().scoped_access_token as { id: string; http_auth: Creds }
}

/** A user of its own (limits are per user), with full rights. */
async function freshAdmin() {
  return t.newAccount()
}

describe('policy size', () => {
  // Resources of an unknown type are valid and match nothing (decision 19); each may be 1,024
  // characters long and a policy may name 500: what the review sent (~0.5 MB policies).
  const sizeOf = (resources: string[]) =>
    JSON.stringify([{ Resources: resources, Activities: 'R' }]).length
  /** A policy whose JSON text is exactly `bytes` long (ASCII). */
  function policyOf(bytes: number): PolicyStatement[] {
    const resources: string[] = []
    while (bytes - sizeOf(resources) > 1100) resources.push(`${'a'.repeat(1000)}::`)
    // One more resource adds its length, two quotes and a comma.
    resources.push(`${'b'.repeat(bytes - sizeOf(resources) - 3 - 2)}::`)
    return [{ Resources: resources, Activities: 'R' }]
  }

  it('takes 64 KiB of policy and refuses one byte more with a 400 naming policy', async () => {
    expect(JSON.stringify(policyOf(65_536)).length).toBe(65_536)
    const ok = await mint({ auth: t.admin.api_key }, { policy: policyOf(65_536) })
    expect(ok.statusCode, ok.body).toBe(200)
    const big = await mint({ auth: t.admin.api_key }, { policy: policyOf(65_537) })
    expect(big.statusCode).toBe(400)
    expect(errorOf(big).message).toBe('policy must be at most 65536 bytes as JSON')
  })

  it('counts UTF-8 bytes, not characters', async () => {
    // 'é' is two bytes: 40 resources of 1,000 are 40,000 characters but over 80,000 bytes.
    const resources = Array.from({ length: 40 }, () => `${'é'.repeat(1000)}::`)
    const res = await mint(
      { auth: t.admin.api_key },
      { policy: [{ Resources: resources, Activities: 'R' }] },
    )
    expect(res.statusCode, res.body).toBe(400)
    expect(errorOf(res).message).toBe('policy must be at most 65536 bytes as JSON')
  })
})

describe('which SATs may mint', () => {
  it('the README’s public forgot-password SAT cannot mint SATs', async () => {
    const flowId = randomUUID()
    const page = await sat([
      { Resources: [`PasswordResetFlow::${flowId}::Email::.*`], Activities: 'C' },
    ])
    const res = await mint({ basic: page.http_auth }, { policy: [] })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).code).toBe('SAT_CANNOT_MINT')
    const rows = await t.deps.store.db
      .selectFrom('scoped_access_tokens')
      .select(['id', 'consumed_uses'])
      .where('parent_id', '=', page.id)
      .execute()
    expect(rows).toEqual([])
  })

  it('a SAT whose own policy grants C on ScopedAccessToken:: mints (within its bounds)', async () => {
    const parent = await sat([READ, MINT])
    const child = await mint({ basic: parent.http_auth }, { policy: [READ] })
    expect(child.statusCode, child.body).toBe(200)
    // The grant must be the SAT's own: its creator's full access does not lend it.
    const noGrant = await sat([READ])
    expect((await mint({ basic: noGrant.http_auth })).statusCode).toBe(400)
  })
})

describe('live SATs per parent: 100', () => {
  it('the 100th live child passes, the 101st is a 400 TOO_MANY_CHILD_SATS; expired ones free room', async () => {
    const parent = await sat([READ, MINT])
    const short: string[] = []
    for (let i = 0; i < 100; i++) {
      const res = await mint(
        { basic: parent.http_auth },
        { not_valid_after: i < 10 ? inMinutes(5) : inMinutes(60) },
      )
      expect(res.statusCode, res.body).toBe(200)
      if (i < 10) short.push(res.json().scoped_access_token.id)
    }
    const over = await mint({ basic: parent.http_auth })
    expect(over.statusCode).toBe(400)
    expect(errorOf(over)).toMatchObject({
      code: 'TOO_MANY_CHILD_SATS',
      message: 'A scoped access token may have at most 100 live tokens it created',
    })
    clock.advance(6 * 60_000)
    for (let i = 0; i < 10; i++)
      expect((await mint({ basic: parent.http_auth })).statusCode).toBe(200)
    expect((await mint({ basic: parent.http_auth })).statusCode).toBe(400)
  })

  it('holds under concurrent requests', async () => {
    const parent = await sat([READ, MINT])
    for (let i = 0; i < 95; i++)
      expect((await mint({ basic: parent.http_auth })).statusCode).toBe(200)
    const results = await Promise.all(
      Array.from({ length: 20 }, () => mint({ basic: parent.http_auth })),
    )
    expect(results.filter((r) => r.statusCode === 200)).toHaveLength(5)
    expect(results.filter((r) => r.statusCode === 400)).toHaveLength(15)
    const live = await t.deps.store.db
      .selectFrom('scoped_access_tokens')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('parent_id', '=', parent.id)
      .executeTakeFirstOrThrow()
    expect(Number(live.n)).toBe(100)
  })
})

describe('live SATs per user: 1,000', () => {
  it('the 1,000th passes, the 1,001st is a 400 TOO_MANY_SATS; expired and spent ones do not count', async () => {
    const owner = await freshAdmin()
    const now = clock.now().toISOString()
    const row = (i: number, expires: string, allowed: number | null, consumed: number) => ({
      account_id: owner.account_id,
      id: randomUUID(),
      creator_id: owner.userId,
      parent_id: null,
      name: `seed ${i}`,
      policy: '[]',
      not_valid_after: expires,
      expires_at: expires,
      allowed_uses: allowed,
      consumed_uses: consumed,
      secret_digest: `digest-${randomUUID()}`,
      created_at: now,
    })
    const rows = [
      ...Array.from({ length: 999 }, (_, i) => row(i, inMinutes(60), null, 0)),
      // Neither an expired nor a spent token is live.
      ...Array.from({ length: 20 }, (_, i) => row(i, inMinutes(-1), null, 0)),
      ...Array.from({ length: 20 }, (_, i) => row(i, inMinutes(60), 1, 1)),
    ]
    for (let i = 0; i < rows.length; i += 200)
      await t.deps.store.db
        .insertInto('scoped_access_tokens')
        .values(rows.slice(i, i + 200))
        .execute()
    const last = await mint({ auth: owner.api_key })
    expect(last.statusCode, last.body).toBe(200)
    const over = await mint({ auth: owner.api_key })
    expect(over.statusCode).toBe(400)
    expect(errorOf(over)).toMatchObject({
      code: 'TOO_MANY_SATS',
      message: 'A user may have at most 1000 live scoped access tokens',
    })
    // Another user is not held by it.
    expect((await mint({ auth: t.admin.api_key })).statusCode).toBe(200)
  })
})
