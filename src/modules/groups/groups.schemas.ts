import { Type } from 'typebox'
import { FormString, RequiredFormString, responses, success, Uuid } from '../../http/schemas.js'

export const PolicyStatementSchema = Type.Object({
  Resources: Type.Array(Type.String()),
  Activities: Type.String(),
})

export const GroupSchema = Type.Object({
  id: Uuid,
  group_id: Uuid,
  name: Type.String(),
  policy: Type.Array(PolicyStatementSchema),
  user_ids: Type.Optional(Type.Array(Uuid)),
})

export const GroupParams = Type.Object({ group_id: Uuid })

export const CreateGroupForm = Type.Object({
  name: RequiredFormString('unique group name'),
  policy: FormString('base64 of a JSON policy array (default empty)'),
  user_ids: FormString('comma-separated user ids; unknown users are ignored'),
})

/** JSON (`user_operation`, real arrays) or the deprecated form (`operation`, base64, commas). */
export const UpdateGroupBody = Type.Object({
  name: Type.Optional(Type.String()),
  policy: Type.Optional(Type.Unknown({ description: 'JSON: policy array; form: base64 of it' })),
  user_ids: Type.Optional(
    Type.Unknown({ description: 'JSON: array of ids; form: comma-separated' }),
  ),
  user_operation: Type.Optional(Type.String({ description: 'APPEND (default) or REMOVE' })),
  operation: Type.Optional(
    Type.String({ description: 'deprecated form spelling of user_operation' }),
  ),
})

export const MembershipBody = Type.Object({
  user_ids: Type.Array(Uuid, { minItems: 1, maxItems: 1000 }),
})

export const MembershipParams = Type.Object({ group_id: Uuid, user_ids: Type.String() })

export const GroupResponse = responses(success({ group: GroupSchema }))
export const GroupListResponse = responses(success({ groups: Type.Array(GroupSchema) }))
export const EmptyResponse = responses(success({}))
