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

/** How far the batched re-index of a schema's documents is (issue 14). */
const ReindexProgress = Type.Object({
  state: Type.Union([Type.Literal('none'), Type.Literal('running'), Type.Literal('done')], {
    description:
      'none: never re-indexed; running: batches left (a search on a changed field finds only the documents done so far); done: every document re-indexed',
  }),
  documents_done: Type.Integer({ minimum: 0 }),
  documents_total: Type.Integer({ minimum: 0 }),
})
export const ReindexResponse = responses(success({ reindex: ReindexProgress }))
export const SchemaListResponse = responses(success({ schemas: Type.Array(SchemaSchema) }))
export const UserSchemaResponse = responses(success({ user_schema: SchemaSchema }))
