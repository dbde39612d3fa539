import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { buildTestApp, createUser, type TestApp } from '../helpers/app.js'

/**
 * A SAT minted with an access token lives no longer than that session (issue 10, finding 7): a
 * stolen session could otherwise mint a SAT valid until 9999 that outlives a password change,
 * a reset, logout and logout_all. SATs minted with an API key are untouched.
 */
const START = '2030-01-01T00:00:00.000Z'
const PASSWORD = 'first password 1'
const FAR = '9999-12-31T00:00:00Z'
const clock = new ManualClock(START)
let t: TestApp

beforeAll(async () => {
  t = await buildTestApp({ clock })
})
afterAll(() => t.close())
beforeEach(() => clock.set(START))

type Creds = { username: string; password: string }
const selfPolicy = [
  { Resources: ['User::$[id=self.id]', 'ScopedAccessToken::.*'], Activities: 'CRUD' },
]

async function mint(auth: { auth?: string; basic?: Creds }): Promise<Creds> {
  const res = await t.api.post('/v1/scoped_access_tokens', {
    ...auth,
    json: { name: 'kept', policy: selfPolicy, not_valid_after: FAR },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().scoped_access_token.http_auth
}

async function satWorks(basic: Creds, userId: string): Promise<boolean> {
  return (await t.api.get(`/v1/users/${userId}`, { basic })).statusCode === 200
}

async function session(username: string): Promise<string> {
  const res = await t.api.post('/v1/auth/login', {
    form: { account_id: t.admin.account_id, username, password: PASSWORD },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().user.access_token
}

describe('SATs minted through a session end with it', () => {
  it('a password change by an administrator ends them, and their children', async () => {
    const u = await createUser(t, { password: PASSWORD, policy: selfPolicy })
    const sat = await mint({ auth: await session(u.username) })
    const child = await mint({ basic: sat })
    expect(await satWorks(sat, u.id)).toBe(true)
    expect(await satWorks(child, u.id)).toBe(true)
    const set = await t.api.put(`/v1/users/${u.id}/password`, {
      auth: t.admin.api_key,
      json: { password: 'new password 22' },
    })
    expect(set.statusCode, set.body).toBe(200)
    expect(await satWorks(sat, u.id)).toBe(false)
    expect(await satWorks(child, u.id)).toBe(false)
  })

  it('logout_all, logout and the session expiring end them', async () => {
    const u = await createUser(t, { password: PASSWORD, policy: selfPolicy })
    const a = await mint({ auth: await session(u.username) })
    expect((await t.api.post('/v1/auth/logout_all', { auth: u.apiKey })).statusCode).toBe(200)
    expect(await satWorks(a, u.id)).toBe(false)

    const token = await session(u.username)
    const b = await mint({ auth: token })
    expect((await t.api.post('/v1/auth/logout', { auth: token })).statusCode).toBe(200)
    expect(await satWorks(b, u.id)).toBe(false)

    const c = await mint({ auth: await session(u.username) })
    clock.advance(24 * 60 * 60 * 1000 + 1000)
    expect(await satWorks(c, u.id)).toBe(false)
  })

  it('SATs minted with an API key (or a SAT minted so) outlive every session change', async () => {
    const u = await createUser(t, { password: PASSWORD, policy: selfPolicy })
    const sat = await mint({ auth: u.apiKey })
    const child = await mint({ basic: sat })
    await t.api.put(`/v1/users/${u.id}/password`, {
      auth: t.admin.api_key,
      json: { password: 'new password 22' },
    })
    await t.api.post('/v1/auth/logout_all', { auth: u.apiKey })
    expect(await satWorks(sat, u.id)).toBe(true)
    expect(await satWorks(child, u.id)).toBe(true)
  })
})
