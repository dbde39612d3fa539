import { randomInt } from 'node:crypto'
import { Secret, TOTP } from 'otpauth'
import type { ManualClock } from '../../src/lib/clock.js'
import { createUser, type TestApp } from './app.js'

export const STEP_MS = 30_000

/**
 * The code an authenticator app shows at this instant, computed as the official SDK's test does
 * (otplib defaults: base32 secret, SHA-1, 6 digits, 30 s) by the otpauth library, not by Coffer.
 */
export function appCode(secret: string, at: Date): string {
  return TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: at.getTime() })
}

/** The code of the step `offset` steps from the clock's current one. */
export function codeAtOffset(secret: string, clock: ManualClock, offset = 0): string {
  return appCode(secret, new Date(clock.now().getTime() + offset * STEP_MS))
}

/** A client address of its own, so per-client login limits never couple unrelated requests. */
export function randomIp(): string {
  return `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`
}

export function login(t: TestApp, form: Record<string, string>, remoteAddress = randomIp()) {
  return t.app.inject({
    method: 'POST',
    url: '/v1/auth/login',
    remoteAddress,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  })
}

export const mfaPath = (userId: string, action: string) => `/v1/users/${userId}/mfa/${action}`

/**
 * A user with a password, enrolled through the API: enrollment started, then finalized with the
 * codes of the current step and the next (both inside the window). Both are then used, so the
 * clock is moved two steps forward: the current code on return is a fresh one.
 */
export async function enrolledUser(t: TestApp, clock: ManualClock, password: string) {
  const user = await createUser(t, { password })
  const secret = await startEnrollment(t, user.id)
  const res = await t.api.post(mfaPath(user.id, 'finalize_enrollment'), {
    auth: t.admin.api_key,
    json: {
      mfa_code_1: codeAtOffset(secret, clock, 0),
      mfa_code_2: codeAtOffset(secret, clock, 1),
    },
  })
  if (res.statusCode !== 200) throw new Error(`finalize failed: ${res.body}`)
  clock.advance(2 * STEP_MS)
  return { ...user, secret }
}

export async function startEnrollment(t: TestApp, userId: string, auth = t.admin.api_key) {
  const res = await t.api.post(mfaPath(userId, 'start_enrollment'), {
    auth,
    json: { issuer: 'Coffer tests' },
  })
  if (res.statusCode !== 200) throw new Error(`start_enrollment failed: ${res.body}`)
  return res.json().mfa.secret as string
}
