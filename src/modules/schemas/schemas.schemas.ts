import { Type } from 'typebox'
import { RequiredFormString, responses, success, Uuid } from '../../http/schemas.js'

const Field = Type.Object({ name: Type.String(), type: Type.String(), index: Type.Boolean() })

export const SchemaSchema = Type.Object({
  id: Uuid,
  vault_id: Uuid,
  name: Type.String(),
  fields: Type.Array(Field),
})
export const VaultParams = Type.Object({ vault_id: Uuid })
export const SchemaParams = Type.Object({ vault_id: Uuid, schema_id: Uuid })
export const AccountParams = Type.Object({ account_id: Uuid })
export const SchemaForm = Type.Object({
  schema: RequiredFormString('base64 of {"name", "fields": [{"name", "type", "index"}]}'),
})

export const SchemaResponse = responses(success({ schema: SchemaSchema }))
export const SchemaListResponse = responses(success({ schemas: Type.Array(SchemaSchema) }))
export const UserSchemaResponse = responses(success({ user_schema: SchemaSchema }))
