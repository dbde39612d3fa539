import { Type } from 'typebox'
import { responses, success, Uuid } from '../../http/schemas.js'

/** Longest route or operation filter (the longest route template is well under it). */
const MAX_FILTER = 200

export const AuditQuery = Type.Object({
  from: Type.Optional(
    Type.String({ format: 'date-time', description: 'events at or after this time (ISO 8601)' }),
  ),
  to: Type.Optional(
    Type.String({ format: 'date-time', description: 'events before this time (ISO 8601)' }),
  ),
  actor_user_id: Type.Optional(Uuid),
  resource_id: Type.Optional(Uuid),
  decision: Type.Optional(
    Type.Union([Type.Literal('allowed'), Type.Literal('denied'), Type.Literal('error')]),
  ),
  operation: Type.Optional(
    Type.String({ minLength: 1, maxLength: MAX_FILTER, description: 'e.g. document.read' }),
  ),
  route: Type.Optional(
    Type.String({ minLength: 1, maxLength: MAX_FILTER, description: 'e.g. /v1/vaults/:vault_id' }),
  ),
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
})

const Nullable = (t: ReturnType<typeof Type.String>) => Type.Union([t, Type.Null()])

export const AuditEventSchema = Type.Object({
  account_id: Type.String(),
  seq: Type.Integer(),
  id: Type.String(),
  at: Type.String(),
  transaction_id: Type.String(),
  actor_user_id: Nullable(Type.String()),
  credential_kind: Nullable(Type.String()),
  credential_ref: Nullable(Type.String()),
  sat_id: Nullable(Type.String()),
  sat_creator_id: Nullable(Type.String()),
  client_ip: Nullable(Type.String()),
  method: Type.String(),
  route: Type.String(),
  operation: Type.String(),
  resources: Type.Record(
    Type.String(),
    Type.Union([Type.Array(Type.String()), Type.Object({ count: Type.Integer() })]),
  ),
  decision: Type.String(),
  reason: Nullable(Type.String()),
  status: Type.Integer(),
  operations_consumed: Type.Integer(),
  operations_category: Nullable(Type.String()),
  prev_hash: Type.String(),
  hash: Type.String(),
})

export const AuditListResponse = responses(
  success({
    data: Type.Object({
      items: Type.Array(AuditEventSchema),
      page: Type.Integer(),
      per_page: Type.Integer(),
      total: Type.Integer(),
    }),
  }),
)
