import { Type } from 'typebox'
import { FormString, responses, success, Uuid } from '../../http/schemas.js'

const NullableUuid = Type.Union([Uuid, Type.Null()])

/** A BLOB as the SDK reads it (nested `blob`), sizes as strings. */
export const BlobSchema = Type.Object({
  id: Uuid,
  blob_id: Uuid,
  vault_id: Uuid,
  owner_id: NullableUuid,
  filename: Type.String(),
  name: Type.String(),
  size: Type.String({ description: 'size in bytes, as a string' }),
  mime_type: Type.String(),
  metadata_document_id: NullableUuid,
})

export const VaultParams = Type.Object({ vault_id: Uuid })
export const BlobParams = Type.Object({ vault_id: Uuid, blob_id: Uuid })
export const OwnerForm = Type.Object({ owner_id: FormString('required; empty removes the owner') })
export const ListQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
})

/** Flat fields of the spec plus the nested object the SDK reads. */
export const WriteResponse = responses(
  success({
    blob_id: Uuid,
    blob_filename: Type.String(),
    blob_size: Type.String(),
    owner_id: NullableUuid,
    blob: BlobSchema,
  }),
)
export const OwnerResponse = responses(
  success({ blob_id: Uuid, owner_id: NullableUuid, blob: BlobSchema }),
)
export const DeleteResponse = responses(success({ blob_id: Uuid, blob: BlobSchema }))
export const ListResponse = responses(
  success({
    data: Type.Object({
      items: Type.Array(BlobSchema),
      page: Type.Integer(),
      per_page: Type.Integer(),
      total: Type.Integer(),
    }),
  }),
)
export const DownloadResponse = {
  200: Type.String({
    format: 'binary',
    description: 'the raw bytes, with Content-Type and Content-Disposition',
  }),
  '4xx': Type.Ref('ErrorEnvelope'),
  '5xx': Type.Ref('ErrorEnvelope'),
}
