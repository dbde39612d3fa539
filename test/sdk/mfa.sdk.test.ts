import type TrueVaultClient from 'truevault'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { appCode, STEP_MS } from '../helpers/mfa.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import {
  expectApiError,
  expectUserShape,
  sdkError,
  sdkFor,
  TRANSPORTS,
  uniqueName,
} from './support.js'

/**
 * The official SDK suite's "user mfa → works" case (its codes computed with otplib's defaults,
 * 30 s apart), plus login with an MFA code and the error types the SDK surfaces. The server runs
 * on a hand-moved clock, so "waits 30 s" is one call instead of half a minute.
 */
/** The SDK suite's own "password" is on the common-password list every new password is checked against. */
const PASSWORD = 'a password of its own'

describe.each(TRANSPORTS)('official SDK (%s): MFA', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  const clock = new ManualClock('2026-05-01T00:00:05.000Z')
  const code = () => appCode(secret, clock.now())
  let server: TestServer
  let admin: TrueVaultClient
  let secret = ''

  beforeAll(async () => {
    server = await startTestServer({ clock })
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
  })
  afterAll(() => server?.close())

  const loginWith = (username: string, password: string, mfaCode?: string) =>
    TrueVaultClient.login(server.admin.account_id, username, password, mfaCode, server.url)

  it('user mfa → works: start, finalize, log in with a code, unenroll', async () => {
    const username = uniqueName()
    const user = await admin.createUser(username, PASSWORD)

    const mfa = await admin.startUserMfaEnrollment(user.id, 'js-integration-tests')
    for (const field of ['qr_code_svg', 'secret', 'uri'] as const) {
      expect(typeof mfa[field]).toBe('string')
    }
    expect(mfa.uri).toContain('issuer=js-integration-tests')
    secret = mfa.secret

    const first = code()
    clock.advance(STEP_MS)
    expect(await admin.finalizeMfaEnrollment(user.id, first, code())).toBeUndefined()
    expect((await admin.readUser(user.id)).mfa_enrolled).toBe(true)

    // Without a code the SDK sees the type TrueVault's MFA sample checks for.
    const required = await sdkError(loginWith(username, PASSWORD))
    expectApiError(required)
    expect(required.error.type).toBe('USER.MFA_CODE_REQUIRED')

    clock.advance(STEP_MS)
    const client = await loginWith(username, PASSWORD, code())
    const me = await client.readCurrentUser()
    expectUserShape(me)
    expect(me).toMatchObject({ id: user.id, mfa_enrolled: true })
    // The same code twice: refused, with the generic login failure.
    const replay = await sdkError(loginWith(username, PASSWORD, code()))
    expectApiError(replay)
    expect(replay.error.code).toBe('LOGIN_FAILED')

    clock.advance(STEP_MS)
    expect(await admin.unenrollMfa(user.id, code(), PASSWORD)).toBeUndefined()
    expect((await admin.readUser(user.id)).mfa_enrolled).toBe(false)
    const plain = await loginWith(username, PASSWORD)
    expect((await plain.readCurrentUser(false)).mfa_enrolled).toBe(false)
  })

  it('surfaces the spec error types', async () => {
    const user = await admin.createUser(uniqueName(), PASSWORD)
    const started = await admin.startUserMfaEnrollment(user.id, 'Coffer')
    secret = started.secret
    const badFinalize = await sdkError(admin.finalizeMfaEnrollment(user.id, code(), code()))
    expectApiError(badFinalize)
    expect(badFinalize.error.type).toBe('USER.MFA_FINALIZE_ENROLLMENT_FAILURE')

    const first = code()
    clock.advance(STEP_MS)
    await admin.finalizeMfaEnrollment(user.id, first, code())
    const again = await sdkError(admin.startUserMfaEnrollment(user.id, 'Coffer'))
    expectApiError(again)
    expect(again.error.type).toBe('USER.MFA_ALREADY_ENROLLED')

    clock.advance(STEP_MS)
    const badUnenroll = await sdkError(admin.unenrollMfa(user.id, code(), 'not the password'))
    expectApiError(badUnenroll)
    expect(badUnenroll.error.type).toBe('USER.MFA_FINALIZE_UNENROLLMENT_FAILURE')
  })

  it("users enroll themselves with U on User::$[id=self.id] (TrueVault's MFA sample)", async () => {
    const group = await admin.createGroup(uniqueName(), [
      { Resources: ['User::$[id=self.id]'], Activities: 'U' },
    ])
    const username = uniqueName()
    const created = await admin.createUser(username, 'a long password', {}, [group.id])
    const self = await loginWith(username, 'a long password')
    const mfa = await self.startUserMfaEnrollment(created.id, 'True Do')
    secret = mfa.secret
    const first = code()
    clock.advance(STEP_MS)
    await self.finalizeMfaEnrollment(created.id, first, code())
    clock.advance(STEP_MS)
    const again = await loginWith(username, 'a long password', code())
    clock.advance(STEP_MS)
    expect(await again.unenrollMfa(created.id, code(), 'a long password')).toBeUndefined()
  })
})
