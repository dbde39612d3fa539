import { Type } from 'typebox'
import { responses, success, Uuid } from '../../http/schemas.js'
import {
  DAILY_OPERATIONS_QUOTA,
  PASSWORD_MIN_LENGTH,
  TOKEN_CAP_SECONDS,
} from './settings.service.js'

export const AccountParams = Type.Object({ account_id: Uuid })

const tokenCap = {
  description:
    'Longest life of an access token, in seconds: login `not_valid_after` beyond it is refused, ' +
    'the default 24 h life is shortened to it, and existing tokens stop working once older. ' +
    'null: no cap beyond the server’s own (`COFFER_ACCESS_TOKEN_MAX_DAYS`).',
  minimum: TOKEN_CAP_SECONDS.min,
  maximum: TOKEN_CAP_SECONDS.max,
}
const requireMfa = {
  description:
    'Users without MFA enrolled cannot log in (403 `USER.MFA_ENROLLMENT_REQUIRED`) until ' +
    'enrolled; API keys are not affected.',
}
const minLength = {
  description: 'Fewest characters of a new password (existing passwords keep working).',
  minimum: PASSWORD_MIN_LENGTH.min,
  maximum: PASSWORD_MIN_LENGTH.max,
}
const revocation = {
  description:
    "A new password ends the user's access tokens, except the one the change was made with.",
}

const quota = {
  description:
    'Operations (billing units) the account may consume per UTC day; a request that would ' +
    'consume operations once the day’s count has reached it is refused 429 ' +
    '`OPERATIONS_QUOTA_EXCEEDED` until the next UTC midnight. null: no quota.',
  minimum: DAILY_OPERATIONS_QUOTA.min,
  maximum: DAILY_OPERATIONS_QUOTA.max,
}

export const Settings = Type.Object({
  max_access_token_duration_seconds: Type.Union([Type.Integer(tokenCap), Type.Null()]),
  require_mfa: Type.Boolean(requireMfa),
  password_min_length: Type.Integer(minLength),
  session_revocation_on_password_change: Type.Boolean(revocation),
  daily_operations_quota: Type.Union([Type.Integer(quota), Type.Null()]),
})

/**
 * The documented PUT body: any of the settings, nothing else. The route reads the body itself
 * (settings.service.ts `parseSettingsPatch`): JSON types exactly, where the app's validator would
 * turn `"true"` or `1` into `true`.
 */
export const SettingsPatchBody = Type.Object(
  {
    max_access_token_duration_seconds: Type.Optional(
      Type.Union([Type.Integer(tokenCap), Type.Null()]),
    ),
    require_mfa: Type.Optional(Type.Boolean(requireMfa)),
    password_min_length: Type.Optional(Type.Integer(minLength)),
    session_revocation_on_password_change: Type.Optional(Type.Boolean(revocation)),
    daily_operations_quota: Type.Optional(Type.Union([Type.Integer(quota), Type.Null()])),
  },
  { additionalProperties: false, minProperties: 1 },
)

export const SettingsResponse = responses(success({ settings: Settings }))
