import { Type } from 'typebox'
import {
  FormString,
  FullQuery,
  RequiredFormString,
  responses,
  success,
  Uuid,
} from '../../http/schemas.js'

const userFields = {
  id: Uuid,
  user_id: Uuid,
  account_id: Uuid,
  username: Type.String(),
  status: Type.String({ description: 'ACTIVATED, PENDING, LOCKED or DEACTIVATED' }),
  mfa_enrolled: Type.Boolean(),
  group_ids: Type.Optional(Type.Array(Uuid, { description: 'with full=true' })),
  access_token: Type.Optional(Type.String({ description: 'only when vended in this response' })),
  api_key: Type.Optional(Type.String({ description: 'only on creation' })),
}

/** v1 user: attributes as base64 of a JSON document (with full=true). */
export const UserV1 = Type.Object({
  ...userFields,
  attributes: Type.Optional(Type.String({ description: 'base64 JSON, with full=true' })),
})

/** v2 user: attributes as JSON. */
export const UserV2 = Type.Object({
  ...userFields,
  attributes: Type.Optional(Type.Unknown({ description: 'JSON, with full=true' })),
})

export const UserParams = Type.Object({ user_id: Uuid })
export const UserIdsParams = Type.Object({
  user_ids: Type.String({ description: 'comma-separated, at most 100' }),
})

export const CreateUserForm = Type.Object({
  username: RequiredFormString('unique among ACTIVATED and LOCKED users'),
  password: FormString('at least 8 characters; omit for a service account'),
  attributes: FormString('base64 of a JSON document'),
  group_ids: FormString('comma-separated group ids'),
  status: FormString('ACTIVATED (default), PENDING or LOCKED'),
  access_token_not_valid_after: FormString('ISO 8601 expiry of the vended access token'),
})

export const UpdateUserForm = Type.Object({
  username: FormString(),
  password: FormString(),
  access_token: FormString('any non-empty value vends a new access token'),
  access_token_not_valid_after: FormString('ISO 8601 expiry of that token'),
  attributes: FormString('base64 of a JSON document'),
  status: FormString('ACTIVATED, PENDING, LOCKED or DEACTIVATED'),
})

export const PasswordBody = Type.Object({ password: Type.String() })
export const AccessTokenForm = Type.Object({ not_valid_after: FormString('ISO 8601 expiry') })

export const ListUsersQuery = Type.Object({
  ...FullQuery.properties,
  status: Type.Optional(
    Type.String({ description: 'comma-separated statuses (default ACTIVATED)' }),
  ),
})

export const UserV1Response = responses(success({ user: UserV1 }))
export const UsersV1Response = responses(success({ users: Type.Array(UserV1) }))
export const UsersV2Response = responses(success({ users: Type.Array(UserV2) }))
export const ApiKeyResponse = responses(success({ api_key: Type.String() }))
export const AccessKeyResponse = responses(
  success({
    user: Type.Object({
      id: Uuid,
      user_id: Uuid,
      access_key: Type.String(),
      secret_key: Type.String(),
    }),
  }),
)
