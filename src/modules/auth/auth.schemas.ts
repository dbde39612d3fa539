import { Type } from 'typebox'
import {
  FormString,
  FullQuery,
  RequiredFormString,
  responses,
  success,
} from '../../http/schemas.js'
import { UserV1 } from '../users/users.schemas.js'

export const LoginForm = Type.Object({
  account_id: RequiredFormString('account id'),
  username: RequiredFormString(),
  password: RequiredFormString(),
  mfa_code: FormString('needed when MFA is enrolled'),
  not_valid_after: FormString('ISO 8601 expiry of the token (default: 24 hours)'),
})

export const UpdateMeForm = Type.Object({
  attributes: RequiredFormString('base64 of a JSON document'),
})

export const MeQuery = FullQuery
export const LoginResponse = responses(success({ user: UserV1 }))
export const LogoutResponse = responses(success({ logout: UserV1 }))
export const MeResponse = responses(success({ user: UserV1 }))
export const LogoutAllResponse = responses(
  success({
    user: UserV1,
    ended_access_tokens: Type.Integer({ description: 'how many access tokens ended' }),
  }),
)
