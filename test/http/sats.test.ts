import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { FULL_ACCESS_POLICY } from '../../src/modules/accounts/accounts.service.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

const clock = new ManualClock('2030-01-01T00:00:00.000Z')
let t: TestApp
let vaultA: string
let vaultB: string

const inOneHour = () => new Date(clock.now().getTime() + 3_600_000).toISOString()
const readVault = (id: string): PolicyStatement[] => [
  { Resources: [`Vault::${id}`], Activities: 'R' },
]
/** What a SAT needs in its own policy to create SATs (decision 50). */
const MINT: PolicyStatement = { Resources: ['ScopedAccessToken::'], Activities: 'C' }
const EVERYTHING: PolicyStatement[] = [...FULL_ACCESS_POLICY, MINT]

type Creds = { username: string; password: string }

async function createSat(
  auth: { auth?: string; basic?: Creds },
  body: Record<string, unknown>,
): Promise<{ id: string; http_auth: Creds } & Record<string, unknown>> {
  const res = await t.api.post('/v1/scoped_access_tokens', {
    ...auth,
    json: { name: 'sat', policy: EVERYTHING, not_valid_after: inOneHour(), ...body },
  })
  if (res.statusCode !== 200) throw new Error(`SAT create failed: ${res.body}`)
  return res.json().scoped_access_token
}

const getVault = (basic: Creds, id = vaultA) => t.api.get(`/v1/vaults/${id}`, { basic })
const satOf = async (id: string) =>
  (await t.api.get(`/v1/scoped_access_tokens/${id}`, { auth: t.admin.api_key })).json()
    .scoped_access_token

beforeAll(async () => {
  t = await buildTestApp({ clock })
  for (const name of ['a', 'b']) {
    const res = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name } })
    if (name === 'a') vaultA = res.json().vault.id
    else vaultB = res.json().vault.id
  }
})
afterAll(() => t.close())
beforeEach(() => clock.set('2030-01-01T00:00:00.000Z'))

describe('POST /v1/scoped_access_tokens', () => {
  it('returns every field once, with a sat- identifier and a secret', async () => {
    const notValidAfter = '2030-01-01T00:10:00.123Z'
    const res = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'reader',
        policy: readVault(vaultA),
        not_valid_after: notValidAfter,
        allowed_uses: 33,
      },
    })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(body.result).toBe('success')
    const sat = body.scoped_access_token
    expect(sat).toMatchObject({
      name: 'reader',
      policy: readVault(vaultA),
      not_valid_after: notValidAfter,
      allowed_uses: 33,
      consumed_uses: 0,
    })
    expect(sat.http_auth.username).toBe(`sat-${sat.id}`)
    expect(sat.http_auth.password).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })

  it('returns not_valid_after exactly as sent', async () => {
    for (const text of ['2030-01-01T00:10:00Z', '2030-01-01T00:10:00.5Z', '2030-01-01T00:10Z']) {
      expect(
        (await createSat({ auth: t.admin.api_key }, { not_valid_after: text })).not_valid_after,
      ).toBe(text)
    }
  })

  it('accepts a missing or null allowed_uses as no limit', async () => {
    expect((await createSat({ auth: t.admin.api_key }, {})).allowed_uses).toBeNull()
    expect(
      (await createSat({ auth: t.admin.api_key }, { allowed_uses: null })).allowed_uses,
    ).toBeNull()
  })

  it.each([
    [{ name: undefined }, 'name is required'],
    [{ name: '' }, 'name is required'],
    [{ name: 7 }, 'name is required'],
    [{ name: 'x'.repeat(101) }, 'name must be at most 100 characters'],
    [{ name: 'a\u0000b' }, 'name must not contain control characters'],
    [{ policy: undefined }, 'policy must be a JSON array'],
    [{ policy: 'R' }, 'policy must be a JSON array'],
    [{ policy: [{ Resources: ['Vault::'], Activities: 'X' }] }, 'policy [0].Activities'],
    [{ not_valid_after: undefined }, 'not_valid_after is required'],
    [{ not_valid_after: 'soon' }, 'not_valid_after must be an ISO 8601 timestamp'],
    [{ not_valid_after: '2029-12-31T23:59:59.999Z' }, 'not_valid_after must be in the future'],
    [
      { not_valid_after: '2030-01-02T00:00:00+02:00' },
      'not_valid_after must be an ISO 8601 time in UTC',
    ],
    [{ not_valid_after: '2030-01-02' }, 'not_valid_after must be an ISO 8601 time in UTC'],
    [{ allowed_uses: 0 }, 'allowed_uses must be an integer'],
    [{ allowed_uses: -1 }, 'allowed_uses must be an integer'],
    [{ allowed_uses: 1.5 }, 'allowed_uses must be an integer'],
    [{ allowed_uses: '3' }, 'allowed_uses must be an integer'],
  ])('refuses %j with a 400 naming the field', async (change, message) => {
    const body: Record<string, unknown> = {
      name: 'n',
      policy: EVERYTHING,
      not_valid_after: inOneHour(),
      ...change,
    }
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k]
    const res = await t.api.post('/v1/scoped_access_tokens', { auth: t.admin.api_key, json: body })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).message).toContain(message)
  })

  it('needs a credential', async () => {
    const res = await t.api.post('/v1/scoped_access_tokens', { json: { name: 'x' } })
    expect(res.statusCode).toBe(401)
  })
})

describe('listing, reading and deleting', () => {
  it('lists only the caller’s SATs, never with a secret', async () => {
    const other = await createUser(t, { policy: EVERYTHING })
    const mine = await createSat({ auth: t.admin.api_key }, { name: 'mine' })
    const theirs = await createSat({ auth: other.apiKey }, { name: 'theirs' })
    const res = await t.api.get('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      headers: { 'content-type': 'application/json' },
    })
    expect(res.statusCode).toBe(200)
    const { items, total, page, per_page } = res.json().data
    expect(page).toBe(1)
    expect(per_page).toBe(100)
    expect(total).toBe(items.length)
    const ids = items.map((s: { id: string }) => s.id)
    expect(ids).toContain(mine.id)
    expect(ids).not.toContain(theirs.id)
    for (const item of items) {
      expect(Object.keys(item).sort()).toEqual([
        'allowed_uses',
        'consumed_uses',
        'id',
        'name',
        'not_valid_after',
        'policy',
      ])
    }
    expect(res.body).not.toContain(mine.http_auth.password)
    const theirList = await t.api.get('/v1/scoped_access_tokens', { auth: other.apiKey })
    expect(theirList.json().data.items.map((s: { id: string }) => s.id)).toEqual([theirs.id])
  })

  it('pages the list', async () => {
    const u = await createUser(t, { policy: EVERYTHING })
    for (const name of ['1', '2', '3']) await createSat({ auth: u.apiKey }, { name })
    const res = await t.api.get('/v1/scoped_access_tokens?page=2&per_page=2', { auth: u.apiKey })
    expect(res.json().data).toMatchObject({ page: 2, per_page: 2, total: 3 })
    expect(res.json().data.items.map((s: { name: string }) => s.name)).toEqual(['3'])
  })

  it('reads one by id (with or without the sat- prefix), 404 for others', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, { name: 'one', allowed_uses: 5 })
    for (const id of [sat.id, `sat-${sat.id}`]) {
      const res = await t.api.get(`/v1/scoped_access_tokens/${id}`, { auth: t.admin.api_key })
      expect(res.statusCode).toBe(200)
      expect(res.json().scoped_access_token).toMatchObject({
        id: sat.id,
        name: 'one',
        allowed_uses: 5,
      })
      expect(res.json().scoped_access_token.http_auth).toBeUndefined()
    }
    const other = await createUser(t, { policy: EVERYTHING })
    for (const [auth, id] of [
      [other.apiKey, sat.id],
      [t.admin.api_key, '00000000-0000-4000-8000-000000000000'],
      [t.admin.api_key, 'not-an-id'],
    ]) {
      const res = await t.api.get(`/v1/scoped_access_tokens/${id}`, { auth })
      expect(res.statusCode).toBe(404)
      expect(errorOf(res).type).toBeTruthy()
    }
  })

  it('delete revokes at once', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, {})
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
    const del = await t.api.delete(`/v1/scoped_access_tokens/${sat.id}`, {
      auth: t.admin.api_key,
      headers: { 'content-type': 'application/json' },
    })
    expect(del.statusCode).toBe(200)
    expect(Object.keys(del.json()).sort()).toEqual(['result', 'transaction_id'])
    const after = await getVault(sat.http_auth)
    expect(after.statusCode).toBe(401)
    expect(errorOf(after).code).toBe('UNAUTHENTICATED')
    expect(
      (await t.api.delete(`/v1/scoped_access_tokens/${sat.id}`, { auth: t.admin.api_key }))
        .statusCode,
    ).toBe(404)
  })

  it('another user cannot delete my SAT', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, {})
    const other = await createUser(t, { policy: EVERYTHING })
    const res = await t.api.delete(`/v1/scoped_access_tokens/${sat.id}`, { auth: other.apiKey })
    expect(res.statusCode).toBe(404)
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
  })
})

describe('authenticating with a SAT', () => {
  it('acts within its policy only', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, { policy: readVault(vaultA) })
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
    const denied = await getVault(sat.http_auth, vaultB)
    expect(denied.statusCode).toBe(401)
    expect(errorOf(denied).code).toBe('PERMISSION_DENIED')
  })

  it('refuses a wrong secret, an unknown id and a malformed identifier', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, {})
    for (const basic of [
      { username: sat.http_auth.username, password: `${sat.http_auth.password}x` },
      { username: 'sat-00000000-0000-4000-8000-000000000000', password: sat.http_auth.password },
      { username: sat.id, password: sat.http_auth.password },
    ]) {
      const res = await getVault(basic)
      expect(res.statusCode).toBe(401)
    }
    expect((await satOf(sat.id)).consumed_uses).toBe(0)
  })

  it('counts each let-through request as a use and refuses once they are spent', async () => {
    const sat = await createSat(
      { auth: t.admin.api_key },
      { policy: readVault(vaultA), allowed_uses: 2 },
    )
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
    expect((await satOf(sat.id)).consumed_uses).toBe(1)
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
    const third = await getVault(sat.http_auth)
    expect(third.statusCode).toBe(401)
    expect(errorOf(third).code).toBe('UNAUTHENTICATED')
    expect((await satOf(sat.id)).consumed_uses).toBe(2)
  })

  it('does not take a use for a refused or invalid request', async () => {
    const sat = await createSat(
      { auth: t.admin.api_key },
      { policy: readVault(vaultA), allowed_uses: 1 },
    )
    expect((await getVault(sat.http_auth, vaultB)).statusCode).toBe(401)
    expect((await t.api.get('/v1/vaults/not-a-uuid', { basic: sat.http_auth })).statusCode).toBe(
      400,
    )
    expect((await satOf(sat.id)).consumed_uses).toBe(0)
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
  })

  it('expires at not_valid_after', async () => {
    const sat = await createSat(
      { auth: t.admin.api_key },
      { not_valid_after: '2030-01-01T00:00:10.000Z' },
    )
    clock.set('2030-01-01T00:00:09.999Z')
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
    clock.set('2030-01-01T00:00:10.000Z')
    expect((await getVault(sat.http_auth)).statusCode).toBe(401)
  })

  it('never exceeds its creator’s current permissions', async () => {
    const user = await createUser(t, { policy: readVault(vaultA) })
    const sat = await createSat({ auth: user.apiKey }, { policy: EVERYTHING })
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
    expect((await getVault(sat.http_auth, vaultB)).statusCode).toBe(401)
    const create = await t.api.post('/v1/vaults', { basic: sat.http_auth, form: { name: 'no' } })
    expect(create.statusCode).toBe(401)
    // The creator loses the grant: the SAT loses it on the very next request.
    const me = await t.api.get(`/v1/users/${user.id}?full=true`, { auth: t.admin.api_key })
    const groupId = me.json().user.group_ids[0]
    await t.api.put(`/v1/groups/${groupId}`, {
      auth: t.admin.api_key,
      form: { operation: 'REMOVE', user_ids: user.id },
    })
    expect((await getVault(sat.http_auth)).statusCode).toBe(401)
  })

  it('stops working when its creator is deactivated', async () => {
    const user = await createUser(t, { policy: EVERYTHING })
    const sat = await createSat({ auth: user.apiKey }, {})
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
    await t.api.delete(`/v1/users/${user.id}`, { auth: t.admin.api_key })
    expect((await getVault(sat.http_auth)).statusCode).toBe(401)
  })

  it('acts as its creator for self matchers', async () => {
    const user = await createUser(t, {
      policy: [{ Resources: ['User::$[id=self.id]'], Activities: 'R' }],
    })
    const sat = await createSat({ auth: user.apiKey }, { policy: EVERYTHING })
    expect((await t.api.get(`/v2/users/${user.id}`, { basic: sat.http_auth })).statusCode).toBe(200)
    expect(
      (await t.api.get(`/v2/users/${t.admin.userId}`, { basic: sat.http_auth })).statusCode,
    ).toBe(404)
  })

  it('is refused by endpoints for user sessions and credential vending', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, {})
    const me = await t.api.get('/v1/auth/me', { basic: sat.http_auth })
    expect(me.statusCode).toBe(400)
    const key = await t.api.post(`/v1/users/${t.admin.userId}/api_key`, { basic: sat.http_auth })
    expect(key.statusCode).toBe(401)
    expect(errorOf(key).code).toBe('CREDENTIAL_NOT_ALLOWED')
    expect((await satOf(sat.id)).consumed_uses).toBe(0)
  })

  it('can register a user (public registration) within its policy', async () => {
    const sat = await createSat(
      { auth: t.admin.api_key },
      { policy: [{ Resources: ['User::'], Activities: 'C' }], allowed_uses: 1 },
    )
    const res = await t.api.post('/v1/users', {
      basic: sat.http_auth,
      form: { username: 'self-registered', password: 'correct horse battery' },
    })
    expect(res.statusCode).toBe(200)
    expect(
      (await t.api.post('/v1/users', { basic: sat.http_auth, form: { username: 'again' } }))
        .statusCode,
    ).toBe(401)
  })

  it('bounds the policy size', async () => {
    const many = Array.from({ length: 101 }, () => ({ Resources: ['Vault::'], Activities: 'R' }))
    const wide = [
      { Resources: Array.from({ length: 501 }, (_, i) => `Vault::${i}`), Activities: 'R' },
    ]
    for (const [policy, message] of [
      [many, 'policy must hold at most 100 statements'],
      [wide, 'policy must name at most 500 resources'],
    ] as const) {
      const res = await t.api.post('/v1/scoped_access_tokens', {
        auth: t.admin.api_key,
        json: { name: 'big', policy, not_valid_after: inOneHour() },
      })
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toBe(message)
    }
  })

  it('is refused by MFA management (spec: API key or access token)', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, {})
    const res = await t.api.post(`/v1/users/${t.admin.userId}/mfa/start_enrollment`, {
      basic: sat.http_auth,
      json: { issuer: 'x' },
    })
    expect(res.statusCode).toBe(401)
    expect(errorOf(res).code).toBe('CREDENTIAL_NOT_ALLOWED')
  })

  it('does not keep the secret in the database', async () => {
    const sat = await createSat({ auth: t.admin.api_key }, {})
    const rows = await t.deps.store.db.selectFrom('scoped_access_tokens').selectAll().execute()
    expect(JSON.stringify(rows)).not.toContain(sat.http_auth.password)
  })
})

describe('SATs minted by SATs', () => {
  it('are bounded by every ancestor and managed by their parent', async () => {
    const parent = await createSat(
      { auth: t.admin.api_key },
      { policy: [...readVault(vaultA), MINT] },
    )
    const child = await createSat(
      { basic: parent.http_auth },
      { name: 'child', policy: EVERYTHING },
    )
    expect((await getVault(child.http_auth)).statusCode).toBe(200)
    expect((await getVault(child.http_auth, vaultB)).statusCode).toBe(401)
    // The parent sees its child; the creator sees both; the child sees none.
    const byParent = await t.api.get('/v1/scoped_access_tokens', { basic: parent.http_auth })
    expect(byParent.json().data.items.map((s: { id: string }) => s.id)).toEqual([child.id])
    const byChild = await t.api.get('/v1/scoped_access_tokens', { basic: child.http_auth })
    expect(byChild.json().data.items).toEqual([])
    expect((await satOf(child.id)).name).toBe('child')
  })

  it('stop working when an ancestor is deleted or expires', async () => {
    const parent = await createSat(
      { auth: t.admin.api_key },
      { not_valid_after: '2030-01-01T00:00:30.000Z' },
    )
    const child = await createSat({ basic: parent.http_auth }, {})
    const grandchild = await createSat({ basic: child.http_auth }, {})
    expect((await getVault(grandchild.http_auth)).statusCode).toBe(200)
    clock.set('2030-01-01T00:00:30.000Z')
    expect((await getVault(grandchild.http_auth)).statusCode).toBe(401)
    expect((await getVault(child.http_auth)).statusCode).toBe(401)

    clock.set('2030-01-01T00:00:00.000Z')
    const p2 = await createSat({ auth: t.admin.api_key }, {})
    const c2 = await createSat({ basic: p2.http_auth }, {})
    await t.api.delete(`/v1/scoped_access_tokens/${p2.id}`, { auth: t.admin.api_key })
    expect((await getVault(c2.http_auth)).statusCode).toBe(401)
    expect(
      (await t.api.get(`/v1/scoped_access_tokens/${c2.id}`, { auth: t.admin.api_key })).statusCode,
    ).toBe(404)
  })

  it('are never minted by a token with a use limit', async () => {
    const limited = await createSat({ auth: t.admin.api_key }, { allowed_uses: 5 })
    const res = await t.api.post('/v1/scoped_access_tokens', {
      basic: limited.http_auth,
      json: { name: 'child', policy: EVERYTHING, not_valid_after: inOneHour() },
    })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).code).toBe('SAT_CANNOT_MINT')
  })

  it('limits the chain length', async () => {
    let sat = await createSat({ auth: t.admin.api_key }, {})
    let refused: number | undefined
    for (let depth = 1; depth < 10 && refused === undefined; depth++) {
      const res = await t.api.post('/v1/scoped_access_tokens', {
        basic: sat.http_auth,
        json: { name: `d${depth}`, policy: EVERYTHING, not_valid_after: inOneHour() },
      })
      if (res.statusCode === 200) sat = res.json().scoped_access_token
      else {
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).code).toBe('SAT_CHAIN_TOO_DEEP')
        refused = depth
      }
    }
    expect(refused).toBe(8)
    expect((await getVault(sat.http_auth)).statusCode).toBe(200)
  })
})

describe('concurrent uses', () => {
  it('lets exactly allowed_uses of 50 concurrent requests through', async () => {
    for (let round = 0; round < 3; round++) {
      const sat = await createSat(
        { auth: t.admin.api_key },
        { policy: readVault(vaultA), allowed_uses: 3 },
      )
      const results = await Promise.all(Array.from({ length: 50 }, () => getVault(sat.http_auth)))
      const codes = results.map((r) => r.statusCode)
      expect(codes.filter((c) => c === 200)).toHaveLength(3)
      expect(codes.filter((c) => c === 401)).toHaveLength(47)
      expect((await satOf(sat.id)).consumed_uses).toBe(3)
    }
  })
})
