import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { MFA_ATTEMPTS } from '../../src/modules/mfa/mfa.service.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import {
  codeAtOffset,
  enrolledUser,
  login,
  mfaPath,
  STEP_MS,
  startEnrollment,
} from '../helpers/mfa.js'
import { expectNoSecrets } from '../helpers/no-secrets.js'

const PASSWORD = 'correct horse battery'
// 10 s into a 30-second step: "now" is never on a step boundary unless a test puts it there.
const clock = new ManualClock('2026-03-01T00:00:10.000Z')

const FINALIZE_FAILURE = 'USER.MFA_FINALIZE_ENROLLMENT_FAILURE'
const UNENROLL_FAILURE = 'USER.MFA_FINALIZE_UNENROLLMENT_FAILURE'

/** A response body without its transaction id: what must not differ between two failures. */
const sansTransaction = (body: string) => {
  const { transaction_id: _, ...rest } = JSON.parse(body)
  return rest
}

describe('MFA', () => {
  let t: TestApp
  const admin = () => t.admin.api_key

  beforeAll(async () => {
    t = await buildTestApp({ clock })
  })
  afterAll(() => t.close())

  const post = (userId: string, action: string, json: unknown, auth = admin()) =>
    t.api.post(mfaPath(userId, action), { auth, json })
  const finalize = (userId: string, mfa_code_1: string, mfa_code_2: string, auth = admin()) =>
    post(userId, 'finalize_enrollment', { mfa_code_1, mfa_code_2 }, auth)
  const unenroll = (userId: string, mfa_code: string, password: string, auth = admin()) =>
    post(userId, 'unenroll', { mfa_code, password }, auth)
  const readUser = async (id: string) =>
    (await t.api.get(`/v1/users/${id}`, { auth: admin() })).json().user
  const creds = (username: string, extra: Record<string, string> = {}) => ({
    account_id: t.admin.account_id,
    username,
    password: PASSWORD,
    ...extra,
  })

  describe('start_enrollment', () => {
    it('returns the secret, key URI and QR code under user_mfa and mfa', async () => {
      const user = await createUser(t, { password: PASSWORD, username: `ada-${Date.now()}` })
      const res = await post(user.id, 'start_enrollment', { issuer: 'Acme: Health:EU' })
      expect(res.statusCode).toBe(200)
      const body = res.json()
      expect(body.result).toBe('success')
      expect(Object.keys(body).sort()).toEqual(['mfa', 'result', 'transaction_id', 'user_mfa'])
      expect(body.mfa).toEqual(body.user_mfa)
      expect(Object.keys(body.mfa).sort()).toEqual(['qr_code_svg', 'secret', 'uri'])
      const { secret, uri, qr_code_svg } = body.mfa
      expect(secret).toMatch(/^[A-Z2-7]{32}$/) // 20 random bytes in base32
      const parsed = new URL(uri)
      expect(parsed.protocol).toBe('otpauth:')
      expect(parsed.host).toBe('totp')
      expect(decodeURIComponent(parsed.pathname)).toBe(`/Acme_ Health_EU:${user.username}`)
      expect(parsed.searchParams.get('issuer')).toBe('Acme_ Health_EU')
      expect(parsed.searchParams.get('secret')).toBe(secret)
      expect(parsed.searchParams.get('algorithm')).toBe('SHA1')
      expect(parsed.searchParams.get('digits')).toBe('6')
      expect(parsed.searchParams.get('period')).toBe('30')
      expect(qr_code_svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
      expect(qr_code_svg.trim().endsWith('</svg>')).toBe(true)
      // Still not enrolled until finalized.
      expect((await readUser(user.id)).mfa_enrolled).toBe(false)
      const plain = await login(t, creds(user.username))
      expect(plain.statusCode).toBe(200)
      expect(plain.json().user.mfa_enrolled).toBe(false)
    })

    it('a new start replaces the pending secret: only the newest one finalizes', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const first = await startEnrollment(t, user.id)
      const second = await startEnrollment(t, user.id)
      expect(second).not.toBe(first)
      const stale = await finalize(
        user.id,
        codeAtOffset(first, clock, 0),
        codeAtOffset(first, clock, 1),
      )
      expect(stale.statusCode).toBe(400)
      expect(errorOf(stale).type).toBe(FINALIZE_FAILURE)
      const ok = await finalize(
        user.id,
        codeAtOffset(second, clock, 0),
        codeAtOffset(second, clock, 1),
      )
      expect(ok.statusCode).toBe(200)
      expect(ok.json()).toEqual({ result: 'success', transaction_id: expect.any(String) })
    })

    it('names the field of a bad issuer or body', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const cases: [unknown, string][] = [
        [{}, 'issuer is required'],
        [{ issuer: 42 }, 'issuer must be a string'],
        [{ issuer: null }, 'issuer must be a string'],
        [{ issuer: ['Acme'] }, 'issuer must be a string'],
        [{ issuer: '  ' }, 'issuer must not be empty'],
        [{ issuer: 'x'.repeat(256) }, 'issuer must be at most 255 characters'],
        [{ issuer: 'Acme\nCorp' }, 'issuer must not contain control characters'],
      ]
      for (const [json, message] of cases) {
        const res = await post(user.id, 'start_enrollment', json)
        expect(res.statusCode, JSON.stringify(json)).toBe(400)
        expect(errorOf(res)).toMatchObject({ code: 'INVALID_PARAMETER', message })
      }
      const noBody = await t.api.post(mfaPath(user.id, 'start_enrollment'), { auth: admin() })
      expect(noBody.statusCode).toBe(400)
      expect(errorOf(noBody).message).toMatch(/body/)
      const badId = await post('not-a-uuid', 'start_enrollment', { issuer: 'x' })
      expect(badId.statusCode).toBe(400)
      expect(errorOf(badId).message).toMatch(/user_id/)
      // Nothing was started by the refused requests.
      const none = await finalize(user.id, '123456', '654321')
      expect(errorOf(none).message).toMatch(/No MFA enrollment was started/)
    })

    it('answers 404 for an unknown user and for a user of another account', async () => {
      const missing = await post('0190aaaa-0000-7000-8000-000000000000', 'start_enrollment', {
        issuer: 'x',
      })
      expect(missing.statusCode).toBe(404)
      const other = await t.newAccount()
      const res = await post(other.userId, 'start_enrollment', { issuer: 'x' })
      expect(res.statusCode).toBe(404)
      for (const action of ['finalize_enrollment', 'unenroll']) {
        const body = { mfa_code_1: '1', mfa_code_2: '2', mfa_code: '1', password: 'x' }
        expect((await post(other.userId, action, body)).statusCode).toBe(404)
      }
    })
  })

  describe('finalize_enrollment', () => {
    it('refuses every pair that is not two consecutive codes within the window', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const secret = await startEnrollment(t, user.id)
      const at = (offset: number) => codeAtOffset(secret, clock, offset)
      const pairs: [string, string, string][] = [
        [at(0), at(0), 'the same code twice'],
        [at(1), at(0), 'reversed'],
        [at(-1), at(1), 'a step apart'],
        [at(-2), at(-1), 'first outside the window'],
        [at(1), at(2), 'second outside the window'],
        ['000000', '000001', 'not codes of this secret'],
        ['abc', '', 'malformed'],
      ]
      for (const [one, two, why] of pairs) {
        if (one === at(0) && two === at(1)) continue // a coincidence would make it valid
        const res = await finalize(user.id, one, two)
        expect(res.statusCode, why).toBe(400)
        expect(errorOf(res)).toMatchObject({
          type: FINALIZE_FAILURE,
          code: 'MFA_FINALIZE_ENROLLMENT_FAILURE',
        })
      }
      expect((await readUser(user.id)).mfa_enrolled).toBe(false)
      // The SDK's own flow: a code, 30 s later the next one, then finalize.
      const first = at(0)
      clock.advance(STEP_MS)
      const res = await finalize(user.id, first, at(0))
      expect(res.statusCode).toBe(200)
      expect((await readUser(user.id)).mfa_enrolled).toBe(true)
    })

    it('names a missing or non-string code', async () => {
      const user = await createUser(t, { password: PASSWORD })
      await startEnrollment(t, user.id)
      const cases: [unknown, string][] = [
        [{ mfa_code_2: '123456' }, 'mfa_code_1 is required'],
        [{ mfa_code_1: '123456' }, 'mfa_code_2 is required'],
        [{ mfa_code_1: 123456, mfa_code_2: '123456' }, 'mfa_code_1 must be a string'],
        [{ mfa_code_1: '123456', mfa_code_2: { code: 1 } }, 'mfa_code_2 must be a string'],
      ]
      for (const [json, message] of cases) {
        const res = await post(user.id, 'finalize_enrollment', json)
        expect(res.statusCode).toBe(400)
        expect(errorOf(res)).toMatchObject({ code: 'INVALID_PARAMETER', message })
      }
    })

    it('answers a finalize without a start with the spec failure', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const res = await finalize(user.id, '123456', '234567')
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).type).toBe(FINALIZE_FAILURE)
    })

    it('makes the user enrolled in every view; the secret is never shown again', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      expect((await readUser(user.id)).mfa_enrolled).toBe(true)
      const v2 = await t.api.get(`/v2/users/${user.id}`, {
        auth: admin(),
        query: { full: 'true' },
      })
      expect(v2.json().users[0].mfa_enrolled).toBe(true)
      const list = await t.api.get('/v1/users', { auth: admin(), query: { full: 'true' } })
      const listed = list.json().users.find((u: { id: string }) => u.id === user.id)
      expect(listed.mfa_enrolled).toBe(true)
      const me = await t.api.get('/v1/auth/me', { auth: user.apiKey, query: { full: 'true' } })
      expect(me.json().user.mfa_enrolled).toBe(true)
      const ok = await login(
        t,
        creds(user.username, { mfa_code: codeAtOffset(user.secret, clock) }),
      )
      expect(ok.statusCode).toBe(200)
      expect(ok.json().user.mfa_enrolled).toBe(true)
      for (const res of [v2, list, me, ok]) {
        expectNoSecrets(res, PASSWORD, user.secret)
        expect(res.body).not.toMatch(/"(mfa|user_mfa|uri|qr_code_svg)"/)
      }
      // No second start and no second finalize once enrolled.
      const again = await post(user.id, 'start_enrollment', { issuer: 'x' })
      expect(again.statusCode).toBe(400)
      expect(errorOf(again)).toMatchObject({
        type: 'USER.MFA_ALREADY_ENROLLED',
        code: 'MFA_ALREADY_ENROLLED',
      })
      expect(again.body).not.toContain(user.secret)
      const refinalize = await finalize(
        user.id,
        codeAtOffset(user.secret, clock, 0),
        codeAtOffset(user.secret, clock, 1),
      )
      expect(errorOf(refinalize).type).toBe('USER.MFA_ALREADY_ENROLLED')
    })

    it('uses up both finalize codes: neither logs in, nor any earlier code', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const secret = await startEnrollment(t, user.id)
      const first = codeAtOffset(secret, clock, 0)
      clock.advance(STEP_MS)
      const second = codeAtOffset(secret, clock, 0)
      expect((await finalize(user.id, first, second)).statusCode).toBe(200)
      for (const code of [first, second]) {
        const res = await login(t, creds(user.username, { mfa_code: code }))
        expect(res.statusCode).toBe(401)
        expect(errorOf(res).code).toBe('LOGIN_FAILED')
      }
      // The next step's code is fresh (inside the window, one step ahead).
      const next = await login(
        t,
        creds(user.username, { mfa_code: codeAtOffset(secret, clock, 1) }),
      )
      expect(next.statusCode).toBe(200)
    })
  })

  describe('login of an enrolled user', () => {
    it('needs mfa_code: USER.MFA_CODE_REQUIRED, once the password is right', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      for (const extra of [{}, { mfa_code: '' }] as Record<string, string>[]) {
        const res = await login(t, creds(user.username, extra))
        expect(res.statusCode).toBe(401)
        expect(errorOf(res)).toEqual({
          type: 'USER.MFA_CODE_REQUIRED',
          code: 'MFA_CODE_REQUIRED',
          message: 'This user has MFA enrolled: log in with mfa_code',
        })
      }
      // A wrong password says nothing about MFA.
      const wrong = await login(t, { ...creds(user.username), password: 'wrong password!' })
      expect(errorOf(wrong).code).toBe('LOGIN_FAILED')
      const ok = await login(
        t,
        creds(user.username, { mfa_code: codeAtOffset(user.secret, clock) }),
      )
      expect(ok.statusCode).toBe(200)
      const token = ok.json().user.access_token
      expect((await t.api.get('/v1/auth/me', { auth: token })).json().user.id).toBe(user.id)
    })

    it('never says which factor failed', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const right = codeAtOffset(user.secret, clock)
      const wrongCode = right === '000000' ? '000001' : '000000'
      const answers = [
        await login(t, creds(user.username, { mfa_code: wrongCode })),
        await login(t, { ...creds(user.username), password: 'not it at all', mfa_code: wrongCode }),
        await login(t, { ...creds(user.username), password: 'not it at all' }),
        await login(t, { ...creds('nobody-at-all'), mfa_code: right }),
        await login(t, creds(user.username, { mfa_code: 'garbage' })),
      ]
      for (const res of answers) {
        expect(res.statusCode).toBe(401)
        expect(sansTransaction(res.body)).toEqual(sansTransaction(answers[0]?.body as string))
      }
      expect(JSON.parse(answers[0]?.body ?? '{}').error.code).toBe('LOGIN_FAILED')
      // And the right code was not used up by any of that: it still logs in.
      expect((await login(t, creds(user.username, { mfa_code: right }))).statusCode).toBe(200)
    })

    it('accepts every code once, and no code older than one already used', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      clock.advance(STEP_MS) // so the previous step is unused too
      const now = codeAtOffset(user.secret, clock, 0)
      const previous = codeAtOffset(user.secret, clock, -1)
      expect((await login(t, creds(user.username, { mfa_code: now }))).statusCode).toBe(200)
      const replay = await login(t, creds(user.username, { mfa_code: now }))
      expect(replay.statusCode).toBe(401)
      expect(errorOf(replay).code).toBe('LOGIN_FAILED')
      // The previous step is inside the window, but older than the code just used.
      if (previous !== now) {
        const older = await login(t, creds(user.username, { mfa_code: previous }))
        expect(errorOf(older).code).toBe('LOGIN_FAILED')
      }
      clock.advance(STEP_MS)
      const fresh = codeAtOffset(user.secret, clock, 0)
      expect((await login(t, creds(user.username, { mfa_code: fresh }))).statusCode).toBe(200)
    })

    it('accepts the step before and after now, not two steps away', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      // Two steps past the finalize codes: the steps on both sides of now are all unused.
      clock.advance(2 * STEP_MS)
      const attempt = (offset: number) =>
        login(t, creds(user.username, { mfa_code: codeAtOffset(user.secret, clock, offset) }))
      // Two steps ahead or behind: refused (and a refused code is not used up).
      const near = [-1, 0, 1].map((o) => codeAtOffset(user.secret, clock, o))
      for (const offset of [2, -2]) {
        if (near.includes(codeAtOffset(user.secret, clock, offset))) continue
        expect((await attempt(offset)).statusCode).toBe(401)
      }
      expect((await attempt(-1)).statusCode).toBe(200)
      expect((await attempt(1)).statusCode).toBe(200)
      // The code one step ahead marks everything up to it used, now included.
      expect((await attempt(0)).statusCode).toBe(401)
      clock.advance(2 * STEP_MS)
      expect((await attempt(0)).statusCode).toBe(200)
    })

    it('a right code with a wrong password is used up: the next code is needed', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const code = codeAtOffset(user.secret, clock)
      const burned = await login(t, {
        ...creds(user.username),
        password: 'wrong password!',
        mfa_code: code,
      })
      expect(errorOf(burned).code).toBe('LOGIN_FAILED')
      const retry = await login(t, creds(user.username, { mfa_code: code }))
      expect(retry.statusCode).toBe(401)
      expect(sansTransaction(retry.body)).toEqual(sansTransaction(burned.body))
      clock.advance(STEP_MS)
      const next = await login(
        t,
        creds(user.username, { mfa_code: codeAtOffset(user.secret, clock) }),
      )
      expect(next.statusCode).toBe(200)
    })

    it(`limits code failures to ${MFA_ATTEMPTS.max} per user per 5 minutes, only after the right password`, async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const good = () => codeAtOffset(user.secret, clock)
      const bad = () => (good() === '999999' ? '999998' : '999999')
      // Wrong passwords (with codes) never count: nobody without the password can lock anyone out.
      for (let i = 0; i < 8; i++) {
        const res = await login(t, {
          ...creds(user.username),
          password: 'guess guess',
          mfa_code: bad(),
        })
        expect(res.statusCode).toBe(401)
      }
      for (let i = 0; i < MFA_ATTEMPTS.max - 1; i++) {
        expect((await login(t, creds(user.username, { mfa_code: bad() }))).statusCode).toBe(401)
      }
      // A success takes its own count back; the failures stay.
      expect((await login(t, creds(user.username, { mfa_code: good() }))).statusCode).toBe(200)
      clock.advance(STEP_MS)
      expect((await login(t, creds(user.username, { mfa_code: bad() }))).statusCode).toBe(401)
      // Five failures in the window: even the right code is not checked (nor used up) now.
      const refused = await login(t, creds(user.username, { mfa_code: good() }))
      expect(refused.statusCode).toBe(401)
      expect(errorOf(refused).code).toBe('LOGIN_FAILED')
      clock.advance(5 * 60_000)
      expect((await login(t, creds(user.username, { mfa_code: good() }))).statusCode).toBe(200)
    })

    it('counts MFA_CODE_REQUIRED answers as failures of the login rate limit', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const ip = '10.99.99.99'
      for (let i = 0; i < 10; i++) {
        expect(errorOf(await login(t, creds(user.username), ip)).type).toBe(
          'USER.MFA_CODE_REQUIRED',
        )
      }
      const limited = await login(
        t,
        creds(user.username, { mfa_code: codeAtOffset(user.secret, clock) }),
        ip,
      )
      expect(limited.statusCode).toBe(429)
    })

    it('ignores mfa_code for users without MFA', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const res = await login(t, creds(user.username, { mfa_code: '123456' }))
      expect(res.statusCode).toBe(200)
      expect(res.json().user.mfa_enrolled).toBe(false)
    })
  })

  describe('unenroll', () => {
    it("needs a valid code and the user's own password, even when an admin calls", async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const code = () => codeAtOffset(user.secret, clock)
      const wrongCode = () => (code() === '111111' ? '111112' : '111111')
      // The admin's own password is not the user's.
      const adminPassword = await unenroll(user.id, code(), t.admin.password)
      expect(adminPassword.statusCode).toBe(400)
      expect(errorOf(adminPassword)).toMatchObject({
        type: UNENROLL_FAILURE,
        code: 'MFA_FINALIZE_UNENROLLMENT_FAILURE',
      })
      // ...and that right code is now used up, exactly as at login.
      const sameCode = await unenroll(user.id, code(), PASSWORD)
      expect(sameCode.statusCode).toBe(400)
      expect(sansTransaction(sameCode.body)).toEqual(sansTransaction(adminPassword.body))
      clock.advance(STEP_MS)
      const badCode = await unenroll(user.id, wrongCode(), PASSWORD)
      expect(sansTransaction(badCode.body)).toEqual(sansTransaction(adminPassword.body))
      expect((await readUser(user.id)).mfa_enrolled).toBe(true)

      const ok = await unenroll(user.id, code(), PASSWORD)
      expect(ok.statusCode).toBe(200)
      expect(ok.json()).toEqual({ result: 'success', transaction_id: expect.any(String) })
      expect((await readUser(user.id)).mfa_enrolled).toBe(false)
      const plain = await login(t, creds(user.username))
      expect(plain.statusCode).toBe(200)
      expect(plain.json().user.mfa_enrolled).toBe(false)
      // Not enrolled any more: unenroll fails, enrollment can start over with a new secret.
      const twice = await unenroll(user.id, code(), PASSWORD)
      expect(errorOf(twice).type).toBe(UNENROLL_FAILURE)
      expect(await startEnrollment(t, user.id)).not.toBe(user.secret)
    })

    it('names a missing or non-string field', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const cases: [unknown, string][] = [
        [{ password: PASSWORD }, 'mfa_code is required'],
        [{ mfa_code: '123456' }, 'password is required'],
        [{ mfa_code: 123456, password: PASSWORD }, 'mfa_code must be a string'],
        [{ mfa_code: '123456', password: 12345678 }, 'password must be a string'],
      ]
      for (const [json, message] of cases) {
        const res = await post(user.id, 'unenroll', json)
        expect(res.statusCode).toBe(400)
        expect(errorOf(res)).toMatchObject({ code: 'INVALID_PARAMETER', message })
      }
    })

    it('answers a user who never enrolled with the spec failure', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const res = await unenroll(user.id, '123456', PASSWORD)
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).type).toBe(UNENROLL_FAILURE)
    })

    it(`refuses with 429 after ${MFA_ATTEMPTS.max} failed attempts in 5 minutes`, async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      for (let i = 0; i < MFA_ATTEMPTS.max; i++) {
        expect((await unenroll(user.id, '000000', 'wrong password')).statusCode).toBe(400)
      }
      const limited = await unenroll(user.id, codeAtOffset(user.secret, clock), PASSWORD)
      expect(limited.statusCode).toBe(429)
      expect(errorOf(limited).type).toBe('rate_limit_error')
      clock.advance(5 * 60_000)
      expect((await unenroll(user.id, codeAtOffset(user.secret, clock), PASSWORD)).statusCode).toBe(
        200,
      )
    })
  })

  describe('authorization', () => {
    it('users with U on User::$[id=self.id] manage their own MFA, and nobody else’s', async () => {
      const self = [{ Resources: ['User::$[id=self.id]'], Activities: 'RU' }]
      const user = await createUser(t, { password: PASSWORD, policy: self })
      const other = await createUser(t, { password: PASSWORD })
      const token = (await login(t, creds(user.username))).json().user.access_token
      const secret = await startEnrollment(t, user.id, token)
      const fin = await finalize(
        user.id,
        codeAtOffset(secret, clock, 0),
        codeAtOffset(secret, clock, 1),
        token,
      )
      expect(fin.statusCode).toBe(200)
      for (const action of ['start_enrollment', 'finalize_enrollment', 'unenroll']) {
        const res = await post(
          other.id,
          action,
          { issuer: 'x', mfa_code_1: '1', mfa_code_2: '2', mfa_code: '1', password: PASSWORD },
          token,
        )
        expect(res.statusCode).toBe(401)
        expect(errorOf(res).code).toBe('PERMISSION_DENIED')
      }
      clock.advance(2 * STEP_MS)
      const off = await unenroll(user.id, codeAtOffset(secret, clock), PASSWORD, user.apiKey)
      expect(off.statusCode).toBe(200)
    })

    it('refuses callers without U on the user, and requests without credentials', async () => {
      const reader = await createUser(t, {
        password: PASSWORD,
        policy: [{ Resources: ['User::.*'], Activities: 'R' }],
      })
      const nobody = await createUser(t, { password: PASSWORD })
      const target = await createUser(t, { password: PASSWORD })
      for (const auth of [reader.apiKey, nobody.apiKey, nobody.accessToken]) {
        const res = await post(target.id, 'start_enrollment', { issuer: 'x' }, auth)
        expect(res.statusCode).toBe(401)
        expect(errorOf(res).code).toBe('PERMISSION_DENIED')
      }
      const anonymous = await t.api.post(mfaPath(target.id, 'start_enrollment'), {
        json: { issuer: 'x' },
      })
      expect(anonymous.statusCode).toBe(401)
      const sat = await t.api.post(mfaPath(target.id, 'start_enrollment'), {
        basic: { username: 'sat-x', password: 'secret' },
        json: { issuer: 'x' },
      })
      expect(sat.statusCode).toBe(401)
    })
  })

  describe('other user changes', () => {
    it('a password change keeps the enrollment', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const next = 'another long password'
      const res = await t.api.put(`/v1/users/${user.id}/password`, {
        auth: admin(),
        json: { password: next },
      })
      expect(res.statusCode).toBe(200)
      expect(res.json().user.mfa_enrolled).toBe(true)
      const noCode = await login(t, { ...creds(user.username), password: next })
      expect(errorOf(noCode).type).toBe('USER.MFA_CODE_REQUIRED')
      const code = codeAtOffset(user.secret, clock)
      const old = await login(t, creds(user.username, { mfa_code: code }))
      expect(errorOf(old).code).toBe('LOGIN_FAILED')
      clock.advance(STEP_MS) // the old password used that code up
      const ok = await login(t, {
        ...creds(user.username),
        password: next,
        mfa_code: codeAtOffset(user.secret, clock),
      })
      expect(ok.statusCode).toBe(200)
    })

    it('deactivation removes the MFA secrets; the MFA routes then refuse the user', async () => {
      const user = await enrolledUser(t, clock, PASSWORD)
      const pending = await createUser(t, { password: PASSWORD })
      await startEnrollment(t, pending.id)
      for (const id of [user.id, pending.id]) {
        const del = await t.api.delete(`/v1/users/${id}`, { auth: admin() })
        expect(del.statusCode).toBe(200)
        expect(del.json().user).toMatchObject({ status: 'DEACTIVATED', mfa_enrolled: false })
        const rows = await t.deps.store.db
          .selectFrom('user_mfa')
          .selectAll()
          .where('user_id', '=', id)
          .execute()
        expect(rows).toEqual([])
        const start = await post(id, 'start_enrollment', { issuer: 'x' })
        expect(start.statusCode).toBe(400)
        expect(errorOf(start).code).toBe('USER_DEACTIVATED')
        const fin = await finalize(id, '123456', '234567')
        expect(errorOf(fin).code).toBe('USER_DEACTIVATED')
        const off = await unenroll(id, '123456', PASSWORD)
        expect(errorOf(off).code).toBe('USER_DEACTIVATED')
      }
      const gone = await login(
        t,
        creds(user.username, { mfa_code: codeAtOffset(user.secret, clock) }),
      )
      expect(errorOf(gone).code).toBe('LOGIN_FAILED')
    })

    it('works for LOCKED and PENDING users (an administrator prepares them)', async () => {
      for (const status of ['LOCKED', 'PENDING']) {
        const user = await createUser(t, { password: PASSWORD })
        await t.api.put(`/v1/users/${user.id}`, { auth: admin(), form: { status } })
        const secret = await startEnrollment(t, user.id)
        const res = await finalize(
          user.id,
          codeAtOffset(secret, clock, 0),
          codeAtOffset(secret, clock, 1),
        )
        expect(res.statusCode).toBe(200)
        expect((await readUser(user.id)).mfa_enrolled).toBe(true)
      }
    })
  })
})
