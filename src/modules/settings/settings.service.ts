import type { Principal } from '../../access/principal.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import type { Executor } from '../../store/executor.js'
import { isCommonPassword } from './password-policy.js'
import * as repo from './settings.repo.js'

/** An account's security settings as the API shows them. */
export interface AccountSettings {
  /** Longest life of an access token, in seconds; null: only the server's own limits. */
  max_access_token_duration_seconds: number | null
  /** Users without MFA cannot log in with a password. */
  require_mfa: boolean
  /** Fewest characters (code points) of a new password. */
  password_min_length: number
  /** A new password ends the user's other access tokens. */
  session_revocation_on_password_change: boolean
  /** Operations the account may consume per UTC day (the metering feature); null: no quota. */
  daily_operations_quota: number | null
}

/** What an account has until it changes a setting (and what accounts of earlier releases have). */
export const DEFAULT_SETTINGS: Readonly<AccountSettings> = Object.freeze({
  max_access_token_duration_seconds: null,
  require_mfa: false,
  password_min_length: 8,
  session_revocation_on_password_change: true,
  daily_operations_quota: null,
})

/**
 * A cap under a minute leaves no time to use a token (a login round trip, clock skew); one over a
 * year limits nothing a security setting is for (null says "no cap" plainly).
 */
export const TOKEN_CAP_SECONDS = { min: 60, max: 365 * 24 * 60 * 60 }
/**
 * The floor is the server's own minimum (ASVS 6.2.1: 8); above 128 a minimum is no longer a
 * policy anyone can follow (passwords may be up to 1,024 characters).
 */
export const PASSWORD_MIN_LENGTH = { min: 8, max: 128 }
/**
 * A quota of 0 would refuse every metered read (lock the data away, not meter it); above a
 * trillion a day no deployment can serve it, and null says "no quota" plainly.
 */
export const DAILY_OPERATIONS_QUOTA = { min: 1, max: 1_000_000_000_000 }

const SETTING_NAMES = Object.keys(DEFAULT_SETTINGS) as (keyof AccountSettings)[]

/** One change of an account's settings, as hooks see it. */
export interface SettingsChange {
  accountId: string
  /** Who changed them (never a secret: the principal carries digests and ids only). */
  principal: Principal
  before: AccountSettings
  after: AccountSettings
  /** The settings the request named, in the order it named them. */
  changed: (keyof AccountSettings)[]
}

/**
 * Work another feature does with a settings change, inside the changing transaction (so it
 * commits or rolls back with it). Hooks must only run SQL: no keyring, no network.
 */
export type SettingsChangeHook = (db: Executor, change: SettingsChange) => Promise<void>

/**
 * Account security settings (issue 13, part 2): read with defaults when the account has no row,
 * changed field by field. Reads take the caller's executor so a transaction sees its own writes.
 */
export class SettingsService {
  readonly #onChange: SettingsChangeHook[] = []

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
  ) {}

  async get(accountId: string, db: Executor = this.db): Promise<AccountSettings> {
    return view(await repo.find(db, accountId))
  }

  /** The account's cap on access-token life in seconds, or null (auth's `TokenCapSource`). */
  /** The account's daily operations quota, or null (the metering feature's quota check). */
  async dailyOperationsQuota(accountId: string, db: Executor = this.db): Promise<number | null> {
    const row = await repo.find(db, accountId)
    return row?.daily_operations_quota == null ? null : Number(row.daily_operations_quota)
  }

  async tokenCapSeconds(accountId: string, db: Executor = this.db): Promise<number | null> {
    return (await this.get(accountId, db)).max_access_token_duration_seconds
  }

  /**
   * Registers work to do with every change (deps.ts): the access-token cap shortens stored
   * tokens. The audit trail (issue 13, part 1) records each change through such a hook, in the
   * same transaction as the change.
   */
  onChange(hook: SettingsChangeHook): void {
    this.#onChange.push(hook)
  }

  /** PUT: the named settings change, the others stay; 400 naming the first bad field. */
  async update(principal: Principal, body: unknown): Promise<AccountSettings> {
    const accountId = principal.accountId
    const patch = parseSettingsPatch(body)
    const changed = Object.keys(patch) as (keyof AccountSettings)[]
    return this.db.transaction().execute(async (trx) => {
      const before = view(await repo.findForUpdate(trx, accountId))
      const row = await repo.upsert(
        trx,
        accountId,
        DEFAULT_COLUMNS,
        toColumns(patch),
        this.clock.now().toISOString(),
      )
      const after = view(row)
      // Audit hook point: the audit trail (issue 13, part 1) registers an `onChange` hook that
      // records this change here, inside its transaction. None is registered yet.
      for (const hook of this.#onChange)
        await hook(trx, { accountId, principal, before, after, changed })
      return after
    })
  }

  /**
   * The account's rules for a new password (the server's own bounds are checked before this,
   * users.service.ts `validatePassword`): its minimum length and no common password. The
   * message never repeats the password.
   */
  async checkNewPassword(accountId: string, password: string, db: Executor = this.db) {
    const { password_min_length: min } = await this.get(accountId, db)
    if ([...password].length < min)
      throw errors.invalidField(
        'password',
        `must be at least ${min} characters (this account's password_min_length)`,
      )
    if (isCommonPassword(password))
      throw errors.invalidField(
        'password',
        'is one of the most commonly used passwords and would be guessed first: choose another',
      )
  }
}

function view(row: repo.SettingsRow | undefined): AccountSettings {
  if (!row) return { ...DEFAULT_SETTINGS }
  return {
    max_access_token_duration_seconds:
      row.max_access_token_duration_seconds === null
        ? null
        : Number(row.max_access_token_duration_seconds),
    require_mfa: Number(row.require_mfa) === 1,
    password_min_length: Number(row.password_min_length),
    session_revocation_on_password_change: Number(row.session_revocation_on_password_change) === 1,
    daily_operations_quota:
      row.daily_operations_quota === null ? null : Number(row.daily_operations_quota),
  }
}

/** Settings → columns (booleans as 0/1), for the fields present. */
function toColumns(s: Partial<AccountSettings>): repo.SettingsPatch {
  const out: repo.SettingsPatch = {}
  if (s.max_access_token_duration_seconds !== undefined)
    out.max_access_token_duration_seconds = s.max_access_token_duration_seconds
  if (s.require_mfa !== undefined) out.require_mfa = s.require_mfa ? 1 : 0
  if (s.password_min_length !== undefined) out.password_min_length = s.password_min_length
  if (s.session_revocation_on_password_change !== undefined)
    out.session_revocation_on_password_change = s.session_revocation_on_password_change ? 1 : 0
  if (s.daily_operations_quota !== undefined) out.daily_operations_quota = s.daily_operations_quota
  return out
}

/** The columns of a new row: every default, before the patch is laid over them. */
const DEFAULT_COLUMNS = toColumns(DEFAULT_SETTINGS) as Required<repo.SettingsPatch>

function integerIn(value: unknown, bounds: { min: number; max: number }): value is number {
  return (
    Number.isInteger(value) && (value as number) >= bounds.min && (value as number) <= bounds.max
  )
}

/**
 * A PUT body → the settings it changes. JSON types exactly: `true`, not `"true"` or `1`; an
 * integer, not `"3600"` or `3600.5`. Unknown fields are refused by name (a misspelt setting must
 * not look applied).
 */
export function parseSettingsPatch(body: unknown): Partial<AccountSettings> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw errors.invalidField('body', 'must be a JSON object of settings')
  const patch: Partial<AccountSettings> = {}
  for (const [field, value] of Object.entries(body)) {
    switch (field) {
      case 'max_access_token_duration_seconds':
        if (value !== null && !integerIn(value, TOKEN_CAP_SECONDS))
          throw errors.invalidField(
            field,
            `must be null (no cap) or an integer from ${TOKEN_CAP_SECONDS.min} to ${TOKEN_CAP_SECONDS.max}`,
          )
        patch[field] = value as number | null
        break
      case 'daily_operations_quota':
        if (value !== null && !integerIn(value, DAILY_OPERATIONS_QUOTA))
          throw errors.invalidField(
            field,
            `must be null (no quota) or an integer from ${DAILY_OPERATIONS_QUOTA.min} to ${DAILY_OPERATIONS_QUOTA.max}`,
          )
        patch[field] = value as number | null
        break
      case 'password_min_length':
        if (!integerIn(value, PASSWORD_MIN_LENGTH))
          throw errors.invalidField(
            field,
            `must be an integer from ${PASSWORD_MIN_LENGTH.min} to ${PASSWORD_MIN_LENGTH.max}`,
          )
        patch[field] = value
        break
      case 'require_mfa':
      case 'session_revocation_on_password_change':
        if (typeof value !== 'boolean') throw errors.invalidField(field, 'must be true or false')
        patch[field] = value
        break
      default:
        throw errors.invalidField(
          field.length <= 64 ? field : `${field.slice(0, 64)}…`,
          `is not an account setting (the settings are ${SETTING_NAMES.join(', ')})`,
        )
    }
  }
  if (Object.keys(patch).length === 0)
    throw errors.invalidField('body', `must name at least one of ${SETTING_NAMES.join(', ')}`)
  return patch
}
