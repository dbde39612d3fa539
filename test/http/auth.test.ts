import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp, unb64 } from '../helpers/app.js'

const PASSWORD = 'correct horse battery'
const clock = new ManualClock('2026-03-01T00:00:00.000Z')

function login(t: TestApp, form: Record<string, string>, remoteAddress = '10.0.0.1') {
  return t.app.inject({
    method: 'POST',
    url: '/v1/auth/login',
    remoteAddress,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  })
}

describe('auth', () => {
  let t: TestApp
  let user: Awaited<ReturnType<typeof createUser>>
  const creds = () => ({
    account_id: t.admin.account_id,
    username: user.username,
    password: PASSWORD,
  })

  beforeAll(async () => {
    t = await buildTestApp({ clock })
    user = await createUser(t, { password: PASSWORD })
  })
  afterAll(() => t.close())

  describe('login', () => {
    it('returns the user and a working access token (urlencoded and multipart)', async () => {
      const res = await login(t, creds())
      expect(res.statusCode).toBe(200)
      const body = res.json()
      expect(body.result).toBe('success')
      expect(body.user).toMatchObject({
        id: user.id,
        user_id: user.id,
        account_id: t.admin.account_id,
        username: user.username,
        status: 'ACTIVATED',
        mfa_enrolled: false,
      })
      expect(body.user.access_token).toMatch(/^[A-Za-z0-9_-]{36}$/)
      const me = await t.api.get('/v1/auth/me', { auth: body.user.access_token })
      expect(me.json().user.id).toBe(user.id)

      const multi = await t.api.post('/v1/auth/login', { multipart: creds() })
      expect(multi.statusCode).toBe(200)
      expect(multi.json().user.access_token).not.toBe(body.user.access_token)
    })

    it('gives tokens 24 hours by default', async () => {
      const token = (await login(t, creds())).json().user.access_token
      clock.advance(24 * 3600_000 - 1000)
      expect((await t.api.get('/v1/auth/me', { auth: token })).statusCode).toBe(200)
      clock.advance(2000)
      expect((await t.api.get('/v1/auth/me', { auth: token })).statusCode).toBe(400)
    })

    it('honours not_valid_after and refuses one in the past', async () => {
      const at = new Date(clock.now().getTime() + 60_000).toISOString()
      const token = (await login(t, { ...creds(), not_valid_after: at })).json().user.access_token
      clock.advance(59_000)
      expect((await t.api.get('/v1/auth/me', { auth: token })).statusCode).toBe(200)
      clock.advance(2000)
      expect((await t.api.get('/v1/auth/me', { auth: token })).statusCode).toBe(400)

      const past = await login(t, { ...creds(), not_valid_after: '2000-01-01T00:00:00.000Z' })
      expect(past.statusCode).toBe(400)
      expect(errorOf(past).message).toMatch(/not_valid_after/)
      const garbage = await login(t, { ...creds(), not_valid_after: 'tomorrow' })
      expect(errorOf(garbage).message).toMatch(/not_valid_after/)
    })

    it('names a missing field', async () => {
      for (const field of ['account_id', 'username', 'password']) {
        const form: Record<string, string> = { ...creds() }
        delete form[field]
        const res = await login(t, form)
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toBe(`${field} is required`)
      }
      const bad = await login(t, { ...creds(), account_id: 'not-a-uuid' })
      expect(bad.statusCode).toBe(400)
      expect(errorOf(bad).message).toMatch(/account_id/)
    })

    it('answers every failure identically, whatever failed', async () => {
      const pending = await createUser(t, { password: PASSWORD })
      await t.api.put(`/v1/users/${pending.id}`, {
        auth: t.admin.api_key,
        form: { status: 'PENDING' },
      })
      const noPassword = await createUser(t)
      const other = await t.newAccount()
      const failures = [
        { ...creds(), password: 'wrong password!' },
        { ...creds(), username: 'nobody-by-this-name' },
        { ...creds(), account_id: other.account_id },
        { ...creds(), account_id: '00000000-0000-4000-8000-000000000000' },
        { ...creds(), username: pending.username },
        { ...creds(), username: noPassword.username, password: 'anything at all' },
      ]
      const bodies = new Set<string>()
      for (const [i, form] of failures.entries()) {
        const res = await login(t, form, `10.1.0.${i}`)
        expect(res.statusCode).toBe(401)
        const { transaction_id, ...rest } = res.json()
        expect(transaction_id).toMatch(/^[0-9a-f-]{36}$/)
        bodies.add(JSON.stringify(rest))
      }
      expect(bodies.size).toBe(1)
      expect(JSON.parse([...bodies][0] as string).error).toEqual({
        message: 'Invalid account, username, password or MFA code',
        type: 'authentication_error',
        code: 'LOGIN_FAILED',
      })
    })

    it('runs one password verification for unknown users too (no timing oracle)', async () => {
      const verify = vi.spyOn(t.deps.hasher, 'verify')
      await login(t, { ...creds(), username: 'ghost' }, '10.2.0.1')
      await login(t, { ...creds(), password: 'not the password' }, '10.2.0.2')
      expect(verify).toHaveBeenCalledTimes(2)
      verify.mockRestore()
    })
  })

  describe('login rate limits', () => {
    it('stops a client after 10 failures, before hashing, without locking out other clients', async () => {
      const victim = await createUser(t, { password: PASSWORD })
      const form = {
        account_id: t.admin.account_id,
        username: victim.username,
        password: 'guess guess',
      }
      for (let i = 0; i < 10; i++) expect((await login(t, form, '10.3.0.1')).statusCode).toBe(401)
      const verify = vi.spyOn(t.deps.hasher, 'verify')
      const limited = await login(t, { ...form, password: PASSWORD }, '10.3.0.1')
      expect(limited.statusCode).toBe(429)
      expect(errorOf(limited)).toMatchObject({
        type: 'rate_limit_error',
        code: 'TOO_MANY_ATTEMPTS',
      })
      expect(verify).not.toHaveBeenCalled()
      verify.mockRestore()
      // The real user, elsewhere, still logs in.
      expect((await login(t, { ...form, password: PASSWORD }, '10.3.0.2')).statusCode).toBe(200)
      // The window passes.
      clock.advance(15 * 60_000)
      expect((await login(t, { ...form, password: PASSWORD }, '10.3.0.1')).statusCode).toBe(200)
    })

    it('caps failures per user at 100 an hour, sparing clients that logged in before', async () => {
      const victim = await createUser(t, { password: PASSWORD })
      const form = {
        account_id: t.admin.account_id,
        username: victim.username,
        password: 'guess guess',
      }
      expect((await login(t, { ...form, password: PASSWORD }, '10.4.9.9')).statusCode).toBe(200)
      for (let i = 0; i < 100; i++) {
        expect((await login(t, form, `10.4.${Math.floor(i / 10)}.${i % 10}`)).statusCode).toBe(401)
      }
      expect((await login(t, { ...form, password: PASSWORD }, '10.4.200.1')).statusCode).toBe(429)
      expect((await login(t, { ...form, password: PASSWORD }, '10.4.9.9')).statusCode).toBe(200)
      clock.advance(60 * 60_000)
      expect((await login(t, { ...form, password: PASSWORD }, '10.4.200.1')).statusCode).toBe(200)
    })
  })

  describe('logout', () => {
    it('revokes exactly the token used', async () => {
      const a = (await login(t, creds())).json().user.access_token
      const b = (await login(t, creds())).json().user.access_token
      const res = await t.api.post('/v1/auth/logout', { auth: a })
      expect(res.statusCode).toBe(200)
      expect(res.json().logout).toMatchObject({
        id: user.id,
        username: user.username,
        account_id: t.admin.account_id,
      })
      expect(res.json().logout.access_token).toBeUndefined()
      expect((await t.api.get('/v1/auth/me', { auth: a })).statusCode).toBe(400)
      expect((await t.api.get('/v1/auth/me', { auth: b })).statusCode).toBe(200)
      expect((await t.api.post('/v1/auth/logout', { auth: a })).statusCode).toBe(401)
    })

    it('refuses API keys and missing credentials with 401', async () => {
      const withKey = await t.api.post('/v1/auth/logout', { auth: user.apiKey })
      expect(withKey.statusCode).toBe(401)
      expect(errorOf(withKey).type).toBe('authentication_error')
      expect((await t.api.post('/v1/auth/logout')).statusCode).toBe(401)
    })
  })

  describe('current user', () => {
    it('reads itself with an API key or an access token, attributes only when full', async () => {
      const plain = await t.api.get('/v1/auth/me', { auth: user.apiKey })
      expect(plain.statusCode).toBe(200)
      expect(plain.json().user.attributes).toBeUndefined()
      const token = (await login(t, creds(), '10.6.0.1')).json().user.access_token
      const full = await t.api.get('/v1/auth/me?full=true&_tv_sdk=1.3.1', { auth: token })
      expect(unb64(full.json().user.attributes)).toEqual({})
      expect(full.json().user.group_ids).toEqual([])
    })

    it('updates its own attributes without any group policy', async () => {
      const res = await t.api.put('/v1/auth/me?full=true', {
        auth: user.apiKey,
        multipart: { attributes: b64({ name: 'Ada' }) },
      })
      expect(res.statusCode).toBe(200)
      expect(unb64(res.json().user.attributes)).toEqual({ name: 'Ada' })
      const cleared = await t.api.put('/v1/auth/me?full=true', {
        auth: user.apiKey,
        form: { attributes: b64(null) },
      })
      expect(unb64(cleared.json().user.attributes)).toBeNull()
    })

    it('rejects bad attributes naming the field', async () => {
      const missing = await t.api.put('/v1/auth/me', { auth: user.apiKey, form: {} })
      expect(missing.statusCode).toBe(400)
      expect(errorOf(missing).message).toBe('attributes is required')
      const bad = await t.api.put('/v1/auth/me', { auth: user.apiKey, form: { attributes: '!!!' } })
      expect(bad.statusCode).toBe(400)
      expect(errorOf(bad).message).toMatch(/^attributes /)
    })

    it('answers 400 for missing, garbage or SAT-shaped credentials', async () => {
      const cases: Record<string, string>[] = [
        {},
        { authorization: 'Basic !!!' },
        { authorization: 'Bearer abc' },
      ]
      for (const headers of cases) {
        const res = await t.api.get('/v1/auth/me', { headers })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).code).toBe('INVALID_AUTHORIZATION')
      }
      const sat = await t.api.get('/v1/auth/me', {
        basic: { username: 'sat-x', password: 'secret' },
      })
      expect(sat.statusCode).toBe(400)
    })

    it('stops working for a LOCKED user and again for ACTIVATED', async () => {
      const u = await createUser(t, { password: PASSWORD })
      await t.api.put(`/v1/users/${u.id}`, { auth: t.admin.api_key, form: { status: 'LOCKED' } })
      expect((await t.api.get('/v1/auth/me', { auth: u.apiKey })).statusCode).toBe(400)
      expect((await login(t, { ...creds(), username: u.username }, '10.5.0.1')).statusCode).toBe(
        401,
      )
      await t.api.put(`/v1/users/${u.id}`, { auth: t.admin.api_key, form: { status: 'ACTIVATED' } })
      expect((await t.api.get('/v1/auth/me', { auth: u.apiKey })).statusCode).toBe(200)
    })
  })
})
