import { Type } from 'typebox'
import { responses, success, Uuid } from '../../http/schemas.js'

const Policy = Type.Array(
  Type.Object({ Resources: Type.Array(Type.String()), Activities: Type.String() }),
)

export const SatSchema = Type.Object({
  id: Uuid,
  name: Type.String(),
  policy: Policy,
  not_valid_after: Type.String({ description: 'ISO 8601 in UTC, exactly as sent at creation' }),
  allowed_uses: Type.Union([Type.Integer(), Type.Null()], { description: 'null: no limit' }),
  consumed_uses: Type.Integer(),
})

export const CreatedSatSchema = Type.Object({
  ...SatSchema.properties,
  http_auth: Type.Object(
    { username: Type.String(), password: Type.String() },
    { description: 'Shown only here: send as HTTP Basic user name and password' },
  ),
})

/** Validated by the service, which names the offending field in its 400. */
export const SatBody = Type.Object(
  {
    name: Type.Unknown({ description: 'at most 100 characters' }),
    policy: Type.Optional(Type.Unknown({ description: 'group-policy syntax' })),
    not_valid_after: Type.Unknown({ description: 'ISO 8601 in UTC (…Z)' }),
    allowed_uses: Type.Optional(Type.Unknown({ description: 'integer ≥ 1, or null for no limit' })),
  },
  { description: 'JSON body' },
)

export const SatParams = Type.Object({
  token_id: Type.String({ description: 'the SAT id (a `sat-` prefix is accepted)' }),
})

export const SatPageQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
})

export const CreatedSatResponse = responses(success({ scoped_access_token: CreatedSatSchema }))
export const SatResponse = responses(success({ scoped_access_token: SatSchema }))
export const SatListResponse = responses(
  success({
    data: Type.Object({
      items: Type.Array(SatSchema),
      page: Type.Integer(),
      per_page: Type.Integer(),
      total: Type.Integer(),
    }),
  }),
)
export const DeletedResponse = responses(success({}))
