import { timingSafeEqual } from 'node:crypto'
import { HOTP, Secret, TOTP } from 'otpauth'

/**
 * TOTP (RFC 6238) as authenticator apps and the official SDK's test (otplib defaults) compute it:
 * HMAC-SHA-1, 6 digits, 30-second steps, base32 secrets. Pure functions: the time is always an
 * argument (from the injected Clock), never read here.
 */
export const TOTP_ALGORITHM = 'SHA1'
export const TOTP_DIGITS = 6
export const TOTP_PERIOD_SECONDS = 30
/** Codes of the step before and after "now" are accepted too (clock drift, typing time). */
export const TOTP_WINDOW = 1
/** 160 bits, the HMAC-SHA-1 key length RFC 4226 §4 recommends. */
export const SECRET_BYTES = 20

/** The time step (RFC 6238 `T`) that contains this instant. */
export function stepAt(at: Date): number {
  return Math.floor(at.getTime() / 1000 / TOTP_PERIOD_SECONDS)
}

/** Base32 text of a raw secret: what authenticator apps and the `secret` field carry. */
export function toBase32(raw: Uint8Array): string {
  return new Secret({ buffer: Uint8Array.from(raw).buffer }).base32
}

/** The code of one time step. */
export function codeForStep(secretBase32: string, step: number): string {
  return HOTP.generate({
    secret: Secret.fromBase32(secretBase32),
    algorithm: TOTP_ALGORITHM,
    digits: TOTP_DIGITS,
    counter: step,
  })
}

/** The code shown at this instant. */
export function codeAt(secretBase32: string, at: Date): string {
  return codeForStep(secretBase32, stepAt(at))
}

/**
 * Every step within the window around `at` whose code equals `code`, in ascending order (more
 * than one only by a 1-in-a-million coincidence). All steps are compared, each in constant time,
 * so the answer's timing does not depend on which step matched. Spaces are ignored (apps show
 * "123 456"); anything else that is not six digits matches nothing.
 */
export function matchingSteps(
  secretBase32: string,
  code: string,
  at: Date,
  window = TOTP_WINDOW,
): number[] {
  const given = code.replace(/\s/g, '')
  if (!/^[0-9]+$/.test(given) || given.length !== TOTP_DIGITS) return []
  const key = Secret.fromBase32(secretBase32)
  const now = stepAt(at)
  const matched: number[] = []
  for (let step = now - window; step <= now + window; step++) {
    const expected = HOTP.generate({
      secret: key,
      algorithm: TOTP_ALGORITHM,
      digits: TOTP_DIGITS,
      counter: step,
    })
    if (timingSafeEqual(Buffer.from(given), Buffer.from(expected))) matched.push(step)
  }
  return matched
}

/**
 * The `otpauth://totp/...` key URI authenticator apps scan. The label is `issuer:account`, so a
 * colon inside the issuer would split it wrongly: colons become underscores (spec).
 */
export function keyUri(options: { issuer: string; account: string; secretBase32: string }): string {
  return new TOTP({
    issuer: options.issuer.replace(/:/g, '_'),
    label: options.account,
    secret: Secret.fromBase32(options.secretBase32),
    algorithm: TOTP_ALGORITHM,
    digits: TOTP_DIGITS,
    period: TOTP_PERIOD_SECONDS,
  }).toString()
}
