import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

/**
 * Sessions end with a password change or reset, access tokens live at most the server-wide
 * maximum (30 days by default), and a user can end every session (issue 10, finding 7).
 */
const START = '2030-01-01T00:00:00.000Z'
const DAY = 24 * 60 * 60 * 1000
const PASSWORD = 'first password 1'
const clock = new ManualClock(START)
let t: TestApp

beforeAll(async () => {
  t = await buildTestApp({ clock })
})
afterAll(() => t.close())
beforeEach(() => clock.set(START))

const works = async (credential: string) =>
  (await t.api.get('/v1/auth/me', { auth: credential })).statusCode === 200

async function login(username: string, password = PASSWORD, notValidAfter?: string) {
  return t.api.post('/v1/auth/login', {
    form: {
      account_id: t.admin.account_id,
      username,
      password,
      ...(notValidAfter !== undefined ? { not_valid_after: notValidAfter } : {}),
    },
  })
}

async function sessions(username: string, n: number): Promise<string[]> {
  const tokens: string[] = []
  for (let i = 0; i < n; i++) {
    const res = await login(username)
    expect(res.statusCode, res.body).toBe(200)
    tokens.push(res.json().user.access_token)
  }
  return tokens
}

const selfPolicy = [{ Resources: ['User::$[id=self.id]'], Activities: 'RU' }]

describe('a new password ends the other sessions', () => {
  it('an administrator setting it (general update or password route) ends every access token', async () => {
    for (const set of [
      (id: string) =>
        t.api.put(`/v1/users/${id}`, {
          auth: t.admin.api_key,
          form: { password: 'new password 22' },
        }),
      (id: string) =>
        t.api.put(`/v1/users/${id}/password`, {
          auth: t.admin.api_key,
          json: { password: 'new password 22' },
        }),
    ]) {
      const u = await createUser(t, { password: PASSWORD })
      const tokens = [u.accessToken, ...(await sessions(u.username, 2))]
      expect((await set(u.id)).statusCode).toBe(200)
      for (const token of tokens) expect(await works(token)).toBe(false)
      // An API key is no session: it stays.
      expect(await works(u.apiKey)).toBe(true)
      // Nor can an old token mint another.
      expect(
        (await t.api.post(`/v1/users/${u.id}/access_token`, { auth: tokens[1] as string }))
          .statusCode,
      ).toBe(401)
    }
  })

  it('a user changing their own password keeps the session it was changed from', async () => {
    for (const route of ['general', 'password'] as const) {
      const u = await createUser(t, { password: PASSWORD, policy: selfPolicy })
      const [current, other] = await sessions(u.username, 2)
      const res =
        route === 'general'
          ? await t.api.put(`/v1/users/${u.id}`, {
              auth: current,
              form: { password: 'changed by me 1' },
            })
          : await t.api.put(`/v1/users/${u.id}/password`, {
              auth: current,
              json: { password: 'changed by me 1' },
            })
      expect(res.statusCode, res.body).toBe(200)
      expect(await works(current as string)).toBe(true)
      expect(await works(other as string)).toBe(false)
      expect(await works(u.accessToken)).toBe(false)
    }
  })

  it('another user’s access token is never the one kept', async () => {
    const boss = await createUser(t, { policy: [{ Resources: ['User::.*'], Activities: 'RU' }] })
    const u = await createUser(t, { password: PASSWORD })
    const [session] = await sessions(u.username, 1)
    const res = await t.api.put(`/v1/users/${u.id}/password`, {
      auth: boss.accessToken,
      json: { password: 'set by the boss' },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(await works(session as string)).toBe(false)
    expect(await works(boss.accessToken)).toBe(true)
  })

  it('a completed reset (a SAT holding the password grant) ends every access token', async () => {
    const u = await createUser(t, { password: PASSWORD })
    const tokens = await sessions(u.username, 2)
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'reset',
        policy: [{ Resources: [`User::${u.id}::Password`], Activities: 'U' }],
        not_valid_after: new Date(clock.now().getTime() + 600_000).toISOString(),
        allowed_uses: 1,
      },
    })
    const reset = await t.api.put(`/v1/users/${u.id}`, {
      basic: sat.json().scoped_access_token.http_auth,
      form: { password: 'after the reset' },
    })
    expect(reset.statusCode, reset.body).toBe(200)
    for (const token of tokens) expect(await works(token)).toBe(false)
    expect((await login(u.username, 'after the reset')).statusCode).toBe(200)
  })

  it('other users’ sessions are untouched', async () => {
    const a = await createUser(t, { password: PASSWORD })
    const b = await createUser(t, { password: PASSWORD })
    const [bSession] = await sessions(b.username, 1)
    await t.api.put(`/v1/users/${a.id}/password`, {
      auth: t.admin.api_key,
      json: { password: 'only a changes' },
    })
    expect(await works(bSession as string)).toBe(true)
  })
})

describe('access-token life is capped at 30 days (COFFER_ACCESS_TOKEN_MAX_DAYS)', () => {
  const at = (ms: number) => new Date(clock.now().getTime() + ms).toISOString()
  const cases: Array<{
    field: string
    vend: (u: Awaited<ReturnType<typeof createUser>>, expiry: string) => ReturnType<typeof login>
  }> = [
    { field: 'not_valid_after', vend: (u, e) => login(u.username, PASSWORD, e) },
    {
      field: 'not_valid_after',
      vend: (u, e) =>
        t.api.post(`/v1/users/${u.id}/access_token`, {
          auth: t.admin.api_key,
          form: { not_valid_after: e },
        }),
    },
    {
      field: 'access_token_not_valid_after',
      vend: (u, e) =>
        t.api.put(`/v1/users/${u.id}`, {
          auth: t.admin.api_key,
          form: { access_token: '1', access_token_not_valid_after: e },
        }),
    },
    {
      field: 'access_token_not_valid_after',
      vend: (_u, e) =>
        t.api.post('/v1/users', {
          auth: t.admin.api_key,
          form: {
            username: `capped-${Math.random().toString(36).slice(2)}`,
            access_token_not_valid_after: e,
          },
        }),
    },
  ]

  it.each(cases.map((c, i) => [i, c.field, c] as const))(
    'route %i: exactly 30 days passes, one second more is a 400 naming %s',
    async (_i, field, c) => {
      const u = await createUser(t, { password: PASSWORD })
      const ok = await c.vend(u, at(30 * DAY))
      expect(ok.statusCode, ok.body).toBe(200)
      const token = ok.json().user.access_token as string
      clock.advance(30 * DAY - 1000)
      expect(await works(token)).toBe(true)
      clock.set(START)
      for (const beyond of [at(30 * DAY + 1000), '9999-12-31T00:00:00Z']) {
        const res = await c.vend(u, beyond)
        expect(res.statusCode, res.body).toBe(400)
        expect(errorOf(res).message).toBe(`${field} must be at most 30 days from now`)
      }
    },
  )

  it('keeps the 24-hour default life', async () => {
    const u = await createUser(t, { password: PASSWORD })
    const [token] = await sessions(u.username, 1)
    clock.advance(DAY - 1000)
    expect(await works(token as string)).toBe(true)
    clock.advance(2000)
    expect(await works(token as string)).toBe(false)
  })
})

describe('POST /v1/auth/logout_all', () => {
  it('ends every access token of the caller’s user, its own included; API keys stay', async () => {
    const u = await createUser(t, { password: PASSWORD })
    const tokens = [u.accessToken, ...(await sessions(u.username, 2))]
    const other = await createUser(t, { password: PASSWORD })
    const res = await t.api.post('/v1/auth/logout_all', { auth: tokens[1] as string })
    expect(res.statusCode, res.body).toBe(200)
    const body = res.json()
    expect(body.result).toBe('success')
    expect(body.ended_access_tokens).toBe(3)
    expect(body.user).toMatchObject({ id: u.id, username: u.username })
    expect(res.body).not.toContain('"access_token"')
    for (const token of tokens) expect(await works(token)).toBe(false)
    expect(await works(u.apiKey)).toBe(true)
    expect(await works(other.accessToken)).toBe(true)
  })

  it('works with an API key, and answers 0 when nothing was left', async () => {
    const u = await createUser(t, { password: PASSWORD })
    const first = await t.api.post('/v1/auth/logout_all', { auth: u.apiKey })
    expect(first.json().ended_access_tokens).toBe(1)
    expect(await works(u.accessToken)).toBe(false)
    const again = await t.api.post('/v1/auth/logout_all', { auth: u.apiKey })
    expect(again.statusCode).toBe(200)
    expect(again.json().ended_access_tokens).toBe(0)
  })

  it('refuses a SAT and an ended token', async () => {
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'no sessions',
        policy: [{ Resources: ['User::.*'], Activities: 'CRUD' }],
        not_valid_after: new Date(clock.now().getTime() + 600_000).toISOString(),
      },
    })
    const bySat = await t.api.post('/v1/auth/logout_all', {
      basic: sat.json().scoped_access_token.http_auth,
    })
    expect(bySat.statusCode).toBe(401)
    expect(errorOf(bySat).code).toBe('CREDENTIAL_NOT_ALLOWED')
    const u = await createUser(t, { password: PASSWORD })
    await t.api.post('/v1/auth/logout_all', { auth: u.accessToken })
    const ended = await t.api.post('/v1/auth/logout_all', { auth: u.accessToken })
    expect(ended.statusCode).toBe(401)
  })

  it('is declared in the OpenAPI document with the other auth routes', () => {
    const doc = t.app.swagger() as {
      paths: Record<string, Record<string, { tags?: string[]; responses?: object }>>
    }
    const op = doc.paths['/v1/auth/logout_all']?.post
    expect(op?.tags).toEqual(['auth'])
    expect(JSON.stringify(op?.responses)).toContain('ended_access_tokens')
  })
})
