import { setTimeout as sleep } from 'node:timers/promises'
import { auditSubject, auditWritesFromHere } from '../../audit/context.js'
import type { PasswordHasher } from '../../crypto/passwords.js'
import { AppError, errors } from '../../lib/errors.js'
import { isUuid } from '../../lib/ids.js'
import { type Meter, noopMeter } from '../../metrics/meter.js'
import type { Executor } from '../../store/executor.js'
import { mfaErrors } from '../mfa/mfa.errors.js'
import type { LoginCodeCheck } from '../mfa/mfa.service.js'
import type { SettingsService } from '../settings/settings.service.js'
import type { UserRow, UsersService } from '../users/users.service.js'
import type { CredentialsService } from './credentials.service.js'
import type { LoginThrottle } from './login-throttle.js'

export interface LoginInput {
  accountId: unknown
  username: unknown
  password: unknown
  mfaCode?: unknown
  notValidAfter?: unknown
  /** The client's address, for the per-client failure limit. */
  client: string
}

/** The MFA step of login (modules/mfa). */
export interface LoginMfa {
  checkLoginCode(
    accountId: string,
    userId: string,
    code: string | undefined,
    passwordValid: boolean,
  ): Promise<LoginCodeCheck>
}

/**
 * Password login. Every failure — unknown account or user, a user that is not ACTIVATED, a user
 * without a password, a wrong password — gives the same 401 after the same work (one argon2
 * verification), so neither the body, the status nor the timing tells them apart. A user with
 * MFA also needs a valid unused `mfa_code`; a wrong or used code fails the same way.
 */
export class LoginService {
  constructor(
    private readonly db: Executor,
    private readonly hasher: PasswordHasher,
    private readonly users: UsersService,
    private readonly credentials: CredentialsService,
    private readonly throttle: LoginThrottle,
    private readonly mfa: LoginMfa,
    /** The account's `require_mfa` (and, through `credentials`, its token cap). */
    private readonly settings: Pick<SettingsService, 'get'>,
    /**
     * How long a login refused by a limit (429) or a full hashing queue (503) waits before it is
     * answered. A flood client waits for each answer before sending again: answered at once, a
     * refused flood comes back thousands of times a second and takes the CPU every other request
     * needs; held (a timer, no work), it cannot. Default 1 s (config.ts).
     */
    private readonly refusalDelayMs = 1000,
    private readonly meter: Meter = noopMeter,
  ) {}

  async login(input: LoginInput): Promise<{ user: UserRow; accessToken: string }> {
    try {
      return await this.#login(input)
    } catch (error) {
      this.#count(error)
      if (this.refusalDelayMs > 0 && isRefusal(error)) await sleep(this.refusalDelayMs)
      throw error
    }
  }

  /** Metrics: refusals by fixed reason (never who or from where). */
  #count(error: unknown): void {
    if (!(error instanceof AppError)) return
    if (error.code === 'LOGIN_FAILED') this.meter.count('login_failures', { reason: 'credentials' })
    else if (error.code === 'MFA_CODE_REQUIRED' || error.code === 'MFA_ENROLLMENT_REQUIRED')
      this.meter.count('login_failures', { reason: 'mfa_required' })
    else if (error.statusCode === 429) this.meter.count('login_throttled', { reason: 'limit' })
    else if (error.statusCode === 503) this.meter.count('login_throttled', { reason: 'busy' })
  }

  async #login(input: LoginInput): Promise<{ user: UserRow; accessToken: string }> {
    const accountId = required(input.accountId, 'account_id')
    const username = required(input.username, 'username')
    const password = required(input.password, 'password')
    if (!isUuid(accountId)) throw errors.invalidField('account_id', 'must be a valid UUID')
    const expiresAt = this.credentials.accessTokenExpiry(input.notValidAfter, 'not_valid_after')
    const attempt = { accountId: accountId.toLowerCase(), username, client: input.client }

    // A flood the hashing queue cannot take is shed here, before it costs any database write.
    this.hasher.assertCapacity()
    // No username holds a control character (validateUsername), and PostgreSQL text cannot hold
    // NUL at all: such a name matches nobody, after the same work as any other unknown name.
    const user = /\p{Cc}/u.test(username)
      ? undefined
      : await this.users.findForLogin(attempt.accountId, username)
    // The trail files the attempt under the account of the user it names, when one exists.
    if (user) auditSubject(user.account_id, user.id)
    // Every limit is checked (and the attempt counted) before any hashing.
    await this.throttle.admit(attempt, user?.id)
    let settled = false
    const fail = async (error: AppError): Promise<never> => {
      settled = true
      await this.throttle.recordFailure(attempt)
      throw error
    }
    try {
      const valid = await this.hasher.verify(user?.password_hash, password)
      if (user?.mfa_enrolled === 1) {
        // Checked even after a wrong password, so a right code is used up (spec, Authentication 4).
        const code = typeof input.mfaCode === 'string' ? input.mfaCode : undefined
        const mfa = await this.mfa.checkLoginCode(user.account_id, user.id, code, valid)
        // Only someone who knows the password learns that a code is needed (decisions.md 62);
        // the attempt stays counted as a failure.
        if (valid && mfa === 'missing') await fail(mfaErrors.codeRequired())
        if (!valid || mfa !== 'ok') await fail(errors.loginFailed())
      } else if (!user || !valid) {
        await fail(errors.loginFailed())
      } else if ((await this.settings.get(user.account_id)).require_mfa) {
        // Only someone who knows the password learns it, as for a missing code; the attempt
        // counts as a failure, so it cannot be repeated without limit.
        await fail(mfaErrors.enrollmentRequired())
      }
      const found = user as UserRow
      // The token is the login's write: it carries the audit event (the counters did not).
      auditWritesFromHere()
      const accessToken = await this.credentials.issueAccessToken(
        this.db,
        found.account_id,
        found.id,
        expiresAt,
      )
      settled = true
      await this.throttle.recordSuccess(attempt, found.id)
      return { user: found, accessToken }
    } catch (error) {
      // No verdict (the hashing queue was full, the database failed, or a right password came
      // with a not_valid_after beyond the account's token cap: a 400): the attempt never
      // happened, and must neither stay in flight nor count as a failure.
      if (!settled) await this.throttle.abandon(attempt)
      throw error
    }
  }
}

const isRefusal = (error: unknown) =>
  error instanceof AppError && (error.statusCode === 429 || error.statusCode === 503)

function required(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') throw errors.invalidField(field, 'is required')
  return value
}
