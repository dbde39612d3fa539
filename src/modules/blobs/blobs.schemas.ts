import { Type } from 'typebox'
import { RequiredFormString, responses, success, Uuid } from '../../http/schemas.js'

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
export const OwnerForm = Type.Object({ owner_id: RequiredFormString('empty removes the owner') })
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
const Bytes = Type.String({ format: 'binary' })

/**
 * The stored bytes, typed as they were uploaded (any media type): Fastify's `content` form, so
 * the document says so; a streamed body is never serialized, so nothing else changes.
 */
export const DownloadResponse = {
  200: {
    description: "The BLOB's bytes, with the type it was uploaded with",
    headers: {
      'Content-Disposition': Type.String({
        description: 'attachment, with the filename (RFC 6266; UTF-8 names as filename*)',
      }),
      'Content-Length': Type.String({ description: 'size in bytes' }),
    },
    content: { '*/*': { schema: Bytes } },
  },
  '4xx': Type.Ref('ErrorEnvelope'),
  '5xx': Type.Ref('ErrorEnvelope'),
}

const UploadFields = {
  file: Type.String({
    format: 'binary',
    description: "the BLOB; its part's filename and type are kept",
  }),
  owner_id: Type.String({ description: 'UUID of the owning user; empty for none' }),
}

/** Raw uploads name the file and its owner in the query string (http/body.ts). */
export const RawUploadQuery = Type.Object({
  filename: Type.Optional(
    Type.String({
      description: 'raw body only: the filename (else `name`, else Content-Disposition)',
    }),
  ),
  name: Type.Optional(
    Type.String({ description: 'raw body only: the filename, as older clients name it' }),
  ),
  owner_id: Type.Optional(Type.String({ description: 'UUID of the owning user' })),
})

/** Multipart with a `file` part, or the file as the whole body in its own type (older clients). */
const uploadBody = (fileRequired: boolean) => ({
  'multipart/form-data': {
    schema: Type.Object(
      {
        file: fileRequired ? UploadFields.file : Type.Optional(UploadFields.file),
        owner_id: Type.Optional(UploadFields.owner_id),
      },
      // A replacement needs one of the two (`file or owner_id is required`).
      fileRequired ? {} : { minProperties: 1 },
    ),
  },
  'application/octet-stream': { schema: Bytes },
  '*/*': { schema: Bytes },
})
export const CreateUploadBody = uploadBody(true)
/** A replacement sends new content, a new owner or both (checked by the route). */
export const ReplaceUploadBody = uploadBody(false)
