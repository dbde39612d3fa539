import { Type } from 'typebox'
import { responses, success, Uuid } from '../../http/schemas.js'

const ValueSpec = Type.Record(Type.String(), Type.String(), {
  description: '{literal_value} | {user_attribute} | {system_field: "username"}',
})

export const FlowSchema = Type.Object({
  id: Uuid,
  name: Type.String(),
  sg_template_id: Type.String(),
  user_email_value_spec: ValueSpec,
  from_email_value_spec: ValueSpec,
  substitutions: Type.Record(Type.String(), ValueSpec),
  scoped_access_token_id: Type.Union([Uuid, Type.Null()], {
    description: 'the linked SAT that bounds the reset tokens, if any',
  }),
})

/** Validated by the service, which names the offending field in its 400. */
export const FlowBody = Type.Object(
  {
    // In the order the service checks them: the first one missing is the one named.
    sg_api_key: Type.Unknown({ description: 'stored encrypted, never shown again' }),
    name: Type.Unknown(),
    sg_template_id: Type.Unknown(),
    user_email_value_spec: Type.Optional(Type.Unknown({ description: 'no literal_value' })),
    from_email_value_spec: Type.Optional(Type.Unknown()),
    substitutions: Type.Optional(Type.Unknown()),
  },
  { description: 'JSON body' },
)

export const FlowParams = Type.Object({ flow_id: Uuid })
export const SendEmailBody = Type.Object({ username: Type.Unknown() })
export const LinkSatBody = Type.Object({ scoped_access_token_id: Type.Unknown() })

export const FlowResponse = responses(success({ password_reset_flow: FlowSchema }))
export const FlowListResponse = responses(success({ password_reset_flows: Type.Array(FlowSchema) }))
export const EmptyResponse = responses(success({}))
