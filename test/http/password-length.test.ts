import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

/**
 * Passwords are 8 to 1,024 characters (decisions.md 3). The spec sets no minimum, so every
 * refusal names the limit, on every route that sets a password, and both bounds count
 * characters as the message says (an emoji is one character).
 */
const TOO_SHORT = 'password must be at least 8 characters'
const TOO_LONG = 'password must be at most 1024 characters'
const KEY = '🔑' // one character, two UTF-16 units

function expectRefused(res: LightMyRequestResponse, message: string) {
  expect(res.statusCode, res.body).toBe(400)
  expect(errorOf(res)).toEqual({
    message,
    type: 'invalid_request_error',
    code: 'INVALID_PARAMETER',
  })
}

describe('password length: the limit is in the message', () => {
  let t: TestApp
  let admin: string
  let seq = 0

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
  })
  afterAll(() => t?.close())

  const setters: [string, (password: string) => Promise<LightMyRequestResponse>][] = [
    [
      'user create (POST /v1/users)',
      (password) =>
        t.api.post('/v1/users', { auth: admin, form: { username: `pw-${++seq}`, password } }),
    ],
    [
      'user update (PUT /v1/users/{id})',
      async (password) => {
        const u = await createUser(t)
        return t.api.put(`/v1/users/${u.id}`, { auth: admin, form: { password } })
      },
    ],
    [
      'password route (PUT /v1/users/{id}/password)',
      async (password) => {
        const u = await createUser(t)
        return t.api.put(`/v1/users/${u.id}/password`, { auth: admin, json: { password } })
      },
    ],
  ]

  describe.each(setters)('%s', (_name, set) => {
    it('7 characters are refused, naming the limit; 8 pass', async () => {
      expectRefused(await set('1234567'), TOO_SHORT)
      expect((await set('1234567x')).statusCode).toBe(200)
    })

    it('counts characters, not UTF-16 units, at both ends', async () => {
      expectRefused(await set(KEY.repeat(7)), TOO_SHORT)
      expect((await set(KEY.repeat(8))).statusCode).toBe(200)
      expect((await set(KEY.repeat(1024))).statusCode).toBe(200)
      expectRefused(await set(KEY.repeat(1025)), TOO_LONG)
    })

    it('1,024 characters pass; 1,025 are refused, naming the limit', async () => {
      expect((await set('x'.repeat(1024))).statusCode).toBe(200)
      expectRefused(await set('x'.repeat(1025)), TOO_LONG)
    })
  })

  it('the refused password was not set (the old one still logs in)', async () => {
    const u = await createUser(t, { password: 'the old password' })
    expectRefused(
      await t.api.put(`/v1/users/${u.id}/password`, { auth: admin, json: { password: 'short' } }),
      TOO_SHORT,
    )
    const login = await t.api.post('/v1/auth/login', {
      form: { account_id: t.admin.account_id, username: u.username, password: 'the old password' },
    })
    expect(login.statusCode).toBe(200)
  })
})
