import { Type } from 'typebox'
import { FormString, RequiredFormString, responses, success, Uuid } from '../../http/schemas.js'

const NullableUuid = Type.Union([Uuid, Type.Null()])

export const DocumentMeta = Type.Object({
  id: Uuid,
  vault_id: Uuid,
  owner_id: NullableUuid,
  schema_id: Type.Optional(NullableUuid),
})

export const VaultParams = Type.Object({ vault_id: Uuid })
export const DocumentParams = Type.Object({ vault_id: Uuid, document_id: Uuid })
export const DocumentIdsParams = Type.Object({
  vault_id: Uuid,
  document_ids: Type.String({ description: 'comma-separated document ids, at most 100' }),
})
export const SchemaDocumentsParams = Type.Object({ vault_id: Uuid, schema_id: Uuid })

/** v2 bodies: real JSON content; `owner_id` null means ownerless. */
export const CreateV2Body = Type.Object({
  document: Type.Unknown({ description: 'any JSON; an object when schema_id is given' }),
  schema_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  owner_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
})
export const UpdateV2Body = Type.Object({
  document: Type.Unknown({ description: 'the new content (required)' }),
  schema_id: Type.Optional(
    Type.Union([Type.String(), Type.Null()], { description: 'omitted keeps the schema' }),
  ),
  owner_id: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description: 'omitted keeps the owner; null makes it ownerless',
    }),
  ),
})

/** v1 (deprecated) form bodies: base64 JSON content; an empty `owner_id` means ownerless. */
export const DocumentForm = Type.Object({
  document: RequiredFormString('base64 of the JSON content'),
  schema_id: FormString(),
  owner_id: FormString('empty for ownerless'),
})
export const OwnerForm = Type.Object({ owner_id: RequiredFormString('empty removes the owner') })

export const ListQuery = Type.Object({
  full: Type.Optional(Type.String({ description: 'true, 1 or 01 include the content (base64)' })),
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
})

const ListItem = Type.Object({
  id: Uuid,
  vault_id: Uuid,
  owner_id: NullableUuid,
  schema_id: NullableUuid,
  document: Type.Optional(Type.String({ description: 'base64 JSON, with full=true' })),
})

export const CreateV2Response = responses(success({ document: DocumentMeta, document_id: Uuid }))
export const CreateV1Response = responses(success({ document_id: Uuid }))
export const ReadV2Response = responses(
  success({
    documents: Type.Array(
      Type.Object({
        id: Uuid,
        vault_id: Uuid,
        owner_id: NullableUuid,
        schema_id: NullableUuid,
        document: Type.Unknown(),
      }),
    ),
  }),
)
const ReadV1Many = success({
  documents: Type.Array(
    Type.Object({
      id: Uuid,
      owner_id: NullableUuid,
      schema_id: NullableUuid,
      document: Type.String(),
    }),
  ),
})
/**
 * Several ids: JSON. One id: the bare base64 text, typed application/octet-stream (Fastify's
 * `content` form picks the serializer by the type the route sets).
 */
export const ReadV1Response = {
  ...responses(ReadV1Many),
  200: {
    description: 'JSON for several ids; for one id only the base64 of its JSON content',
    content: {
      'application/json': { schema: ReadV1Many },
      'application/octet-stream': {
        schema: Type.String({ description: 'base64 of the JSON content' }),
      },
    },
  },
}
export const ListResponse = responses(
  success({
    data: Type.Object({
      items: Type.Array(ListItem),
      page: Type.Integer(),
      per_page: Type.Integer(),
      total: Type.Integer(),
      full_document: Type.Boolean(),
    }),
  }),
)
export const UpdateV2Response = responses(success({ document: DocumentMeta, document_id: Uuid }))
export const OwnerResponse = responses(
  success({ document: DocumentMeta, document_id: Uuid, owner_id: NullableUuid }),
)
export const DeleteResponse = responses(success({ document_id: Uuid, owner_id: NullableUuid }))
