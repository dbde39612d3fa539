import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

/**
 * The account's password rules (issue 13, part 2; ASVS 4.0 2.1.7): `password_min_length`
 * (default 8) and no password from zxcvbn-ts's common-password list, on every route that sets a
 * password — user create, the general update, the password route, a reset token's use of it.
 * Only new passwords are checked: an existing one keeps logging in. No message repeats the
 * password.
 */
const COMMON_MESSAGE =
  'password is one of the most commonly used passwords and would be guessed first: choose another'

let t: TestApp
let seq = 0
beforeAll(async () => {
  t = await buildTestApp()
})
afterAll(() => t.close())
beforeEach(async () => setSettings({ password_min_length: 8 }))

async function setSettings(json: Record<string, unknown>) {
  const res = await t.api.put(`/v1/accounts/${t.admin.account_id}/settings`, {
    auth: t.admin.api_key,
    json,
  })
  expect(res.statusCode, res.body).toBe(200)
}

function expectRefused(res: LightMyRequestResponse, message: string, password: string) {
  expect(res.statusCode, res.body).toBe(400)
  expect(errorOf(res)).toEqual({
    message,
    type: 'invalid_request_error',
    code: 'INVALID_PARAMETER',
  })
  expect(res.body).not.toContain(password)
}

const loginStatus = async (username: string, password: string) =>
  (
    await t.api.post('/v1/auth/login', {
      form: { account_id: t.admin.account_id, username, password },
    })
  ).statusCode

/** A password reset's credential: a single-use SAT with U on the user's password only. */
async function resetToken(userId: string) {
  const res = await t.api.post('/v1/scoped_access_tokens', {
    auth: t.admin.api_key,
    json: {
      name: 'reset',
      policy: [{ Resources: [`User::${userId}::Password`], Activities: 'U' }],
      not_valid_after: '2999-01-01T00:00:00Z',
      allowed_uses: 1,
    },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().scoped_access_token.http_auth as { username: string; password: string }
}

const setters: [string, (password: string) => Promise<LightMyRequestResponse>][] = [
  [
    'user create (POST /v1/users)',
    (password) =>
      t.api.post('/v1/users', {
        auth: t.admin.api_key,
        form: { username: `rules-${++seq}`, password },
      }),
  ],
  [
    'user update (PUT /v1/users/{id})',
    async (password) => {
      const u = await createUser(t)
      return t.api.put(`/v1/users/${u.id}`, { auth: t.admin.api_key, form: { password } })
    },
  ],
  [
    'password route (PUT /v1/users/{id}/password)',
    async (password) => {
      const u = await createUser(t)
      return t.api.put(`/v1/users/${u.id}/password`, {
        auth: t.admin.api_key,
        json: { password },
      })
    },
  ],
  [
    'password reset (a reset token on the password route)',
    async (password) => {
      const u = await createUser(t)
      return t.api.put(`/v1/users/${u.id}/password`, {
        basic: await resetToken(u.id),
        json: { password },
      })
    },
  ],
]

describe.each(setters)('password rules: %s', (_name, set) => {
  it('refuses a common password, in any case, without repeating it', async () => {
    for (const common of ['password123', 'PassWord123', 'qwertyuiop', 'iloveyou'])
      expectRefused(await set(common), COMMON_MESSAGE, common)
    expect((await set('a less common phrase 7')).statusCode).toBe(200)
  })

  it('takes the account’s minimum length, counted in characters', async () => {
    await setSettings({ password_min_length: 12 })
    const short = 'eleven char'
    expectRefused(
      await set(short),
      "password must be at least 12 characters (this account's password_min_length)",
      short,
    )
    expect((await set('twelve chars')).statusCode).toBe(200)
    // Two UTF-16 units, one character each: eleven are too few.
    expectRefused(
      await set('🔑'.repeat(11)),
      "password must be at least 12 characters (this account's password_min_length)",
      '🔑',
    )
    expect((await set('🔑'.repeat(12))).statusCode).toBe(200)
  })
})

describe('password rules: what they leave alone', () => {
  it('an existing password shorter than a new minimum still logs in; a new one must follow', async () => {
    const u = await createUser(t, { password: 'short pw' })
    await setSettings({ password_min_length: 20 })
    expect(await loginStatus(u.username, 'short pw')).toBe(200)
    const res = await t.api.put(`/v1/users/${u.id}/password`, {
      auth: t.admin.api_key,
      json: { password: 'still too short 1' },
    })
    expect(res.statusCode, res.body).toBe(400)
    expect(await loginStatus(u.username, 'short pw')).toBe(200)
  })

  it('a refused password does not spend a reset token’s single use', async () => {
    const u = await createUser(t)
    const basic = await resetToken(u.id)
    const path = `/v1/users/${u.id}/password`
    expect((await t.api.put(path, { basic, json: { password: 'password1' } })).statusCode).toBe(400)
    const ok = await t.api.put(path, { basic, json: { password: 'a better passphrase 9' } })
    expect(ok.statusCode, ok.body).toBe(200)
    expect(await loginStatus(u.username, 'a better passphrase 9')).toBe(200)
  })

  it('another account’s minimum does not apply here', async () => {
    const other = await t.newAccount()
    const res = await t.api.put(`/v1/accounts/${other.account_id}/settings`, {
      auth: other.api_key,
      json: { password_min_length: 40 },
    })
    expect(res.statusCode, res.body).toBe(200)
    const created = await t.api.post('/v1/users', {
      auth: t.admin.api_key,
      form: { username: `rules-${++seq}`, password: 'nine char' },
    })
    expect(created.statusCode, created.body).toBe(200)
  })
})
