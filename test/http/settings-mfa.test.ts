import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import {
  codeAtOffset,
  enrolledUser,
  login,
  mfaPath,
  STEP_MS,
  startEnrollment,
} from '../helpers/mfa.js'

/**
 * `require_mfa` (issue 13, part 2): a user without MFA cannot log in with a password — 403
 * `USER.MFA_ENROLLMENT_REQUIRED`, told only to someone who gave the right password — until an
 * administrator (or the user's own API key) enrolls them. API keys keep working.
 */
const clock = new ManualClock('2030-01-01T00:00:00.000Z')
const PASSWORD = 'second factor 1'
let t: TestApp

beforeAll(async () => {
  t = await buildTestApp({ clock })
})
afterAll(() => t.close())
beforeEach(() => setRequireMfa(false))

async function setRequireMfa(on: boolean) {
  const res = await t.api.put(`/v1/accounts/${t.admin.account_id}/settings`, {
    auth: t.admin.api_key,
    json: { require_mfa: on },
  })
  expect(res.statusCode, res.body).toBe(200)
}

const form = (username: string, extra: Record<string, string> = {}) => ({
  account_id: t.admin.account_id,
  username,
  password: PASSWORD,
  ...extra,
})

describe('require_mfa', () => {
  it('refuses a user without MFA after the right password with 403, and only then', async () => {
    const u = await createUser(t, { password: PASSWORD })
    expect((await login(t, form(u.username))).statusCode).toBe(200)
    await setRequireMfa(true)
    const refused = await login(t, form(u.username))
    expect(refused.statusCode, refused.body).toBe(403)
    expect(errorOf(refused as never)).toEqual({
      type: 'USER.MFA_ENROLLMENT_REQUIRED',
      code: 'MFA_ENROLLMENT_REQUIRED',
      message:
        'This account requires MFA and this user has none enrolled: ask an administrator to enroll MFA for the user, then log in with mfa_code',
    })
    // A wrong password learns nothing about the rule.
    const wrong = await login(t, form(u.username, { password: 'not the password' }))
    expect(wrong.statusCode).toBe(401)
    expect(errorOf(wrong as never).code).toBe('LOGIN_FAILED')
  })

  it('an enrolled user logs in with a code as before', async () => {
    const u = await enrolledUser(t, clock, PASSWORD)
    await setRequireMfa(true)
    const res = await login(t, form(u.username, { mfa_code: codeAtOffset(u.secret, clock) }))
    expect(res.statusCode, res.body).toBe(200)
  })

  it('an administrator enrolls the user, who can then log in with a code', async () => {
    const u = await createUser(t, { password: PASSWORD })
    await setRequireMfa(true)
    expect((await login(t, form(u.username))).statusCode).toBe(403)
    // The admin flow: start and finish the enrollment with the admin's API key, handing the
    // secret to the user's authenticator app.
    const secret = await startEnrollment(t, u.id)
    const done = await t.api.post(mfaPath(u.id, 'finalize_enrollment'), {
      auth: t.admin.api_key,
      json: {
        mfa_code_1: codeAtOffset(secret, clock, 0),
        mfa_code_2: codeAtOffset(secret, clock, 1),
      },
    })
    expect(done.statusCode, done.body).toBe(200)
    clock.advance(2 * STEP_MS)
    const res = await login(t, form(u.username, { mfa_code: codeAtOffset(secret, clock) }))
    expect(res.statusCode, res.body).toBe(200)
  })

  it('the user’s own API key may enroll them too, and keeps working meanwhile', async () => {
    const u = await createUser(t, {
      password: PASSWORD,
      policy: [{ Resources: ['User::$[id=self.id]'], Activities: 'RU' }],
    })
    await setRequireMfa(true)
    expect((await t.api.get('/v1/auth/me', { auth: u.apiKey })).statusCode).toBe(200)
    const secret = await startEnrollment(t, u.id, u.apiKey)
    const done = await t.api.post(mfaPath(u.id, 'finalize_enrollment'), {
      auth: u.apiKey,
      json: {
        mfa_code_1: codeAtOffset(secret, clock, 0),
        mfa_code_2: codeAtOffset(secret, clock, 1),
      },
    })
    expect(done.statusCode, done.body).toBe(200)
    clock.advance(2 * STEP_MS)
    const res = await login(t, form(u.username, { mfa_code: codeAtOffset(secret, clock) }))
    expect(res.statusCode, res.body).toBe(200)
  })

  it('turned off again, a user without MFA logs in', async () => {
    const u = await createUser(t, { password: PASSWORD })
    await setRequireMfa(true)
    expect((await login(t, form(u.username))).statusCode).toBe(403)
    await setRequireMfa(false)
    expect((await login(t, form(u.username))).statusCode).toBe(200)
  })

  it('a refusal counts as a failed attempt: the per-client limit still holds', async () => {
    const u = await createUser(t, { password: PASSWORD })
    await setRequireMfa(true)
    const statuses: number[] = []
    for (let i = 0; i < 11; i++)
      statuses.push((await login(t, form(u.username), '10.9.9.9')).statusCode)
    expect(statuses).toEqual([...Array(10).fill(403), 429])
  })
})
