import { randomBytes } from 'node:crypto'
import type { Keyring } from '../../crypto/keyring.js'
import type { PasswordHasher } from '../../crypto/passwords.js'
import type { SealedColumn } from '../../crypto/sealed-column.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { ILL_FORMED_TEXT, isWellFormedText } from '../../lib/input.js'
import { type Meter, noopMeter } from '../../metrics/meter.js'
import type { Executor } from '../../store/executor.js'
import type { UserRow, UsersService } from '../users/users.service.js'
import { mfaErrors } from './mfa.errors.js'
import * as repo from './mfa.repo.js'
import { keyUri, matchingSteps, SECRET_BYTES, toBase32 } from './totp.js'

/**
 * Code attempts per user, counted before each check (OWASP ASVS 4.0 2.8.x; decisions.md 63: at most
 * 5 failures per 5 minutes). Only attempts that already passed the password (login) or that come
 * from an authorized caller (unenroll) count, so nobody without the password can lock a user out.
 */
export const MFA_ATTEMPTS = { max: 5, windowMs: 5 * 60_000 }
const MAX_ISSUER = 255

/** What the login learns about the MFA code of an enrolled user. */
export type LoginCodeCheck = 'ok' | 'missing' | 'invalid'

export interface Enrollment {
  /** Base32 text, as authenticator apps take it. */
  secret: string
  uri: string
  qrCodeSvg: string
}

/** Both secrets are encrypted at rest, bound to the user's id. */
const secretContext = (userId: string) => `user-mfa-secret\n${userId}`

/** Thrown inside a transaction to roll it back when a conditional write did not apply. */
class NotApplied extends Error {}

/**
 * TOTP multi-factor authentication (spec, MFA enrollment): start → finalize with two consecutive
 * codes → enrolled; unenroll with a code and the password. A code is accepted once: accepting it
 * moves the user's `last_used_step` forward with a conditional UPDATE, so that code and every
 * earlier one are dead on every node.
 */
export class MfaService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly keyring: Keyring,
    private readonly hasher: PasswordHasher,
    private readonly users: UsersService,
    private readonly meter: Meter = noopMeter,
  ) {}

  /**
   * The active and the pending TOTP secrets, as `coffer keys reencrypt` walks them. A state
   * change (confirm, disable, a code used) compares the ciphertext it read: one racing a
   * re-encryption loses and is answered as if the secret had changed (the client retries).
   */
  sealedColumns(): SealedColumn[] {
    const column = (name: string, field: repo.MfaSealedColumn): SealedColumn => ({
      name,
      listNotUnder: async (accountId, keyId, after, limit) =>
        (await repo.listSealedNotUnderKey(this.db, field, accountId, keyId, after, limit)).map(
          (row) => ({
            id: row.user_id,
            scope: '',
            ciphertext: row.sealed,
            context: secretContext(row.user_id),
          }),
        ),
      replace: (accountId, record, sealed) =>
        repo.replaceSealed(this.db, field, accountId, record.id, record.ciphertext, sealed),
    })
    return [column('mfa_secrets', 'secret'), column('mfa_pending_secrets', 'pending_secret')]
  }

  /** A new pending secret (replacing any earlier one); refused once enrolled. */
  async startEnrollment(accountId: string, userId: string, issuer: unknown): Promise<Enrollment> {
    const name = validateIssuer(issuer)
    const user = await this.#live(accountId, userId)
    if (user.mfa_enrolled === 1) throw mfaErrors.alreadyEnrolled()
    const secret = toBase32(randomBytes(SECRET_BYTES))
    const uri = keyUri({ issuer: name, account: user.username, secretBase32: secret })
    // Loaded on the first enrollment: most servers never draw a QR code.
    const { default: QRCode } = await import('qrcode')
    const qrCodeSvg = await QRCode.toString(uri, { type: 'svg' })
    const sealed = await this.keyring.encrypt(accountId, secret, secretContext(userId))
    const now = this.clock.now().toISOString()
    if (!(await repo.savePending(this.db, accountId, userId, sealed, now)))
      throw mfaErrors.alreadyEnrolled()
    return { secret, uri, qrCodeSvg }
  }

  /**
   * Enrolls when `code1` and `code2` are the codes of two consecutive steps, both within the
   * window around now. Both steps then count as used, so neither code can log in.
   */
  async finalizeEnrollment(accountId: string, userId: string, code1: unknown, code2: unknown) {
    const first = codeField(code1, 'mfa_code_1')
    const second = codeField(code2, 'mfa_code_2')
    await this.#live(accountId, userId)
    const row = await repo.find(this.db, accountId, userId)
    if (row?.secret) throw mfaErrors.alreadyEnrolled()
    const pending = row?.pending_secret
    if (!pending) throw mfaErrors.finalizeFailed('No MFA enrollment was started for this user')
    const secret = await this.keyring.decryptText(accountId, pending, secretContext(userId))
    const now = this.clock.now()
    const seconds = new Set(matchingSteps(secret, second, now))
    const firsts = matchingSteps(secret, first, now).filter((s) => seconds.has(s + 1))
    if (firsts.length === 0) {
      throw mfaErrors.finalizeFailed(
        'mfa_code_1 and mfa_code_2 must be the codes of two consecutive time steps',
      )
    }
    const lastUsed = Math.max(...firsts) + 1
    try {
      await this.db.transaction().execute(async (trx) => {
        // The users row before user_mfa: the order deactivation takes them in (no deadlock).
        await this.users.setMfaEnrolled(trx, accountId, userId, true)
        const at = now.toISOString()
        if (!(await repo.activate(trx, accountId, userId, pending, lastUsed, at)))
          throw new NotApplied()
      })
    } catch (e) {
      if (!(e instanceof NotApplied)) throw e
      // Another request replaced the pending secret or finalized first.
      throw mfaErrors.finalizeFailed('The MFA enrollment changed meanwhile; start it again')
    }
  }

  /**
   * Unenrolls with a valid unused code and the user's own password (whoever calls). A right code
   * with a wrong password is used up, as at login. The answer never says which one failed.
   */
  async unenroll(accountId: string, userId: string, code: unknown, password: unknown) {
    const given = codeField(code, 'mfa_code')
    const typed = stringField(password, 'password')
    const user = await this.#live(accountId, userId)
    const row = await repo.find(this.db, accountId, userId)
    const sealed = row?.secret
    if (!sealed) throw mfaErrors.unenrollFailed('MFA is not enrolled for this user')
    const now = this.clock.now()
    const attempts = await repo.countAttempt(this.db, accountId, userId, now, MFA_ATTEMPTS.windowMs)
    if (attempts === undefined) throw mfaErrors.unenrollFailed('MFA is not enrolled for this user')
    if (attempts > MFA_ATTEMPTS.max) throw errors.rateLimited()
    const secret = await this.keyring.decryptText(accountId, sealed, secretContext(userId))
    const passwordOk = await this.hasher.verify(user.password_hash, typed)
    const steps = matchingSteps(secret, given, now)
    let done = false
    if (passwordOk) done = await this.#removeWithCode(accountId, userId, sealed, steps)
    else await this.#consume(accountId, userId, sealed, steps)
    if (!done) {
      this.meter.count('mfa_failures', { operation: 'unenroll' })
      throw mfaErrors.unenrollFailed('The MFA code or the password is not valid')
    }
  }

  /**
   * The MFA step of a login of an enrolled user, after the password was verified. A valid code is
   * used up whether or not the password was right (spec, Authentication 4).
   */
  async checkLoginCode(
    accountId: string,
    userId: string,
    code: string | undefined,
    passwordValid: boolean,
  ): Promise<LoginCodeCheck> {
    const check = await this.#checkLoginCode(accountId, userId, code, passwordValid)
    if (check === 'invalid') this.meter.count('mfa_failures', { operation: 'login' })
    return check
  }

  async #checkLoginCode(
    accountId: string,
    userId: string,
    code: string | undefined,
    passwordValid: boolean,
  ): Promise<LoginCodeCheck> {
    if (code === undefined || code.trim() === '') return 'missing'
    const row = await repo.find(this.db, accountId, userId)
    const sealed = row?.secret
    if (!sealed) return 'invalid'
    const now = this.clock.now()
    if (passwordValid) {
      const attempts = await repo.countAttempt(
        this.db,
        accountId,
        userId,
        now,
        MFA_ATTEMPTS.windowMs,
      )
      if (attempts === undefined || attempts > MFA_ATTEMPTS.max) return 'invalid'
    }
    const secret = await this.keyring.decryptText(accountId, sealed, secretContext(userId))
    const steps = matchingSteps(secret, code, now)
    if (!(await this.#consume(accountId, userId, sealed, steps)) || !passwordValid) return 'invalid'
    await repo.uncountAttempt(this.db, accountId, userId)
    return 'ok'
  }

  /** Deactivation: the secrets go (runs inside the deactivating transaction; SQL only). */
  async forget(db: Executor, accountId: string, userId: string): Promise<void> {
    await repo.remove(db, accountId, userId)
    await this.users.setMfaEnrolled(db, accountId, userId, false)
  }

  /** Operator recovery (`coffer mfa reset`): a user who lost their device is unenrolled. */
  async reset(accountId: string, userId: string): Promise<void> {
    await this.users.get(accountId, userId)
    await this.db.transaction().execute(async (trx) => {
      await this.users.setMfaEnrolled(trx, accountId, userId, false)
      await repo.remove(trx, accountId, userId)
    })
  }

  /** Uses up the first still-unused step among those the code matched. */
  async #consume(accountId: string, userId: string, sealed: string, steps: number[]) {
    for (const step of steps) {
      if (await repo.consumeStep(this.db, accountId, userId, sealed, step)) return true
    }
    return false
  }

  async #removeWithCode(accountId: string, userId: string, sealed: string, steps: number[]) {
    if (steps.length === 0) return false
    try {
      await this.db.transaction().execute(async (trx) => {
        await this.users.setMfaEnrolled(trx, accountId, userId, false)
        for (const step of steps) {
          if (await repo.removeWithStep(trx, accountId, userId, sealed, step)) return
        }
        throw new NotApplied()
      })
      return true
    } catch (e) {
      if (e instanceof NotApplied) return false
      throw e
    }
  }

  async #live(accountId: string, userId: string): Promise<UserRow> {
    const user = await this.users.get(accountId, userId)
    if (user.status === 'DEACTIVATED') throw mfaErrors.userDeactivated()
    return user
  }
}

function stringField(value: unknown, field: string): string {
  if (value === undefined) throw errors.invalidField(field, 'is required')
  if (typeof value !== 'string') throw errors.invalidField(field, 'must be a string')
  return value
}

/** Codes must be strings: a number would have lost its leading zeros on the way. */
function codeField(value: unknown, field: string): string {
  return stringField(value, field)
}

function validateIssuer(value: unknown): string {
  const issuer = stringField(value, 'issuer')
  if (issuer.trim() === '') throw errors.invalidField('issuer', 'must not be empty')
  if (issuer.length > MAX_ISSUER)
    throw errors.invalidField('issuer', `must be at most ${MAX_ISSUER} characters`)
  if (/\p{Cc}/u.test(issuer))
    throw errors.invalidField('issuer', 'must not contain control characters')
  // The key URI percent-encodes it: an unpaired surrogate made encodeURIComponent throw (a 500).
  if (!isWellFormedText(issuer)) throw errors.invalidField('issuer', ILL_FORMED_TEXT)
  return issuer
}
