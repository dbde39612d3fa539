import type { Readable } from 'node:stream'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { newTouchedId } from '../../audit/context.js'
import { acceptRawUploads } from '../../http/body.js'
import { errors } from '../../lib/errors.js'
import { createItem, resource } from '../../policy/index.js'
import { optionalId } from '../documents/document-input.js'
import type { BlobRow } from './blobs.repo.js'
import {
  BlobParams,
  CreateUploadBody,
  DeleteResponse,
  DownloadResponse,
  ListQuery,
  ListResponse,
  OwnerForm,
  OwnerResponse,
  RawUploadQuery,
  ReplaceUploadBody,
  VaultParams,
  WriteResponse,
} from './blobs.schemas.js'
import type { BlobsService, StoredContent } from './blobs.service.js'
import { type ReceivedUpload, receiveUpload } from './multipart-upload.js'
import { checkRawUpload, isRawUpload, rawUploadOwner, receiveRawUpload } from './raw-upload.js'

const tags = ['blobs']
type Params = { vault_id: string; blob_id?: string }
const vaultOf = (req: FastifyRequest) => (req.params as Params).vault_id.toLowerCase()
const blobOf = (req: FastifyRequest) => ((req.params as Params).blob_id as string).toLowerCase()
const blobs = (req: FastifyRequest) => resource('Vault', vaultOf(req), 'Blob', '')
const anyItem = (activity: 'C' | 'R' | 'U' | 'D') => (req: FastifyRequest) => ({
  anyItem: { activity, collection: blobs(req) },
})

export function blobView(row: BlobRow) {
  return {
    id: row.id,
    blob_id: row.id,
    vault_id: row.vault_id,
    owner_id: row.owner_id,
    filename: row.filename,
    name: row.filename,
    size: String(row.size),
    mime_type: row.mime_type,
    metadata_document_id: row.metadata_document_id,
  }
}

const written = (row: BlobRow) => ({
  blob_id: row.id,
  blob_filename: row.filename,
  blob_size: String(row.size),
  owner_id: row.owner_id,
  blob: blobView(row),
})

/** `attachment; filename="<ASCII fallback>"; filename*=UTF-8''<RFC 5987>` (RFC 6266). */
export function contentDisposition(filename: string): string {
  if (filename === '') return 'attachment'
  const fallback = filename.replace(/[^\x20-\x7e]|["\\]/g, '_')
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  )
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`
}

/** Parses `owner_id` after the upload; a bad value still removes the stored content. */
async function ownerField(
  service: BlobsService,
  value: string | undefined,
  content: StoredContent | undefined,
): Promise<string | null | undefined> {
  try {
    return optionalId(value, 'owner_id')
  } catch (error) {
    if (content) await service.discard(content)
    throw error
  }
}

export async function blobRoutes(app: FastifyInstance, service: BlobsService): Promise<void> {
  // The two upload routes take raw bodies too: their own scope, so no other route does.
  await app.register((scope, _options, done) => {
    acceptRawUploads(scope)
    uploadRoutes(scope, service)
    done()
  })
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.get(
    '/v1/vaults/:vault_id/blobs/:blob_id',
    {
      schema: {
        tags,
        summary: 'Download a BLOB (raw bytes)',
        params: BlobParams,
        response: DownloadResponse,
      },
      config: {
        operation: 'blob.download',
        access: { policy: (req) => ({ readAny: blobs(req) }) },
      },
    },
    async (req, reply) => {
      const { row, stream } = await service.open(req.actor, vaultOf(req), blobOf(req))
      return reply
        .type(row.mime_type)
        .header('content-disposition', contentDisposition(row.filename))
        .header('content-length', String(row.size))
        .send(stream)
    },
  )

  r.get(
    '/v1/vaults/:vault_id/blobs',
    {
      schema: {
        tags,
        summary: 'List the BLOBs the caller may read',
        params: VaultParams,
        querystring: ListQuery,
        response: ListResponse,
      },
      config: { operation: 'blob.list', access: { policy: (req) => ({ readAny: blobs(req) }) } },
    },
    async (req) => {
      const page = req.query.page ?? 1
      const perPage = req.query.per_page ?? 100
      const { rows, total } = await service.list(req.actor, vaultOf(req), page, perPage)
      return { data: { items: rows.map(blobView), page, per_page: perPage, total } }
    },
  )

  r.put(
    '/v1/vaults/:vault_id/blobs/:blob_id/owner',
    {
      schema: {
        tags,
        summary: "Set or remove a BLOB's owner",
        params: BlobParams,
        body: OwnerForm,
        response: OwnerResponse,
      },
      config: { form: true, operation: 'blob.update_owner', access: { policy: anyItem('D') } },
    },
    async (req) => {
      const ownerId = optionalId(req.body.owner_id, 'owner_id')
      if (ownerId === undefined)
        throw errors.invalidField('owner_id', 'is required (empty removes the owner)')
      const row = await service.find(req.actor, vaultOf(req), blobOf(req))
      const updated = await service.update(req.actor, row, { ownerId })
      return { blob_id: updated.id, owner_id: updated.owner_id, blob: blobView(updated) }
    },
  )

  r.delete(
    '/v1/vaults/:vault_id/blobs/:blob_id',
    {
      schema: { tags, summary: 'Delete a BLOB', params: BlobParams, response: DeleteResponse },
      config: { operation: 'blob.delete', access: { policy: anyItem('D') } },
    },
    async (req) => {
      const row = await service.delete(req.actor, vaultOf(req), blobOf(req))
      return { blob_id: row.id, blob: blobView(row) }
    },
  )
}

const FILE_REQUIRED =
  'is required: send it as the `file` part of a multipart form, or as a non-empty raw body'

/** Multipart as the spec shows it, or the file as the whole body (older clients). */
function receiveBlob(
  req: FastifyRequest,
  store: (file: Readable) => Promise<StoredContent>,
  discard: (content: StoredContent) => Promise<void>,
): Promise<ReceivedUpload> {
  return isRawUpload(req) ? receiveRawUpload(req, store) : receiveUpload(req, store, discard)
}

/** POST and PUT of BLOB content, in a scope that hands raw bodies over unread. */
function uploadRoutes(app: FastifyInstance, service: BlobsService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/vaults/:vault_id/blobs',
    {
      schema: {
        tags,
        summary:
          'Upload a BLOB: multipart (`file`, optional `owner_id`), or the file as the raw body (`filename`, `owner_id` in the query)',
        params: VaultParams,
        response: WriteResponse,
      },
      preValidation: checkRawUpload,
      // A raw upload names its owner in the query, before the body: the rule is the exact create
      // rule, checked before a byte is stored or a SAT use taken. Multipart may send the owner
      // after the file: the coarse rule here, the exact one in the service once it is known.
      config: {
        blobUpload: true,
        // The body is streamed by the route, never parsed by Fastify: documented only.
        openapi: { body: CreateUploadBody, querystring: RawUploadQuery },
        operation: 'blob.upload',
        access: {
          policy: (req) => {
            const ownerId = rawUploadOwner(req)
            return ownerId === undefined
              ? anyItem('C')(req)
              : createItem(['Vault', vaultOf(req), 'Blob'], ownerId)
          },
        },
      },
    },
    async (req) => {
      const vaultId = vaultOf(req)
      const accountId = req.actor.principal.accountId
      await service.requireVault(req.actor, vaultId)
      const blobId = newTouchedId('blob')
      const up = await receiveBlob(
        req,
        (file) => service.storeContent(accountId, vaultId, blobId, file),
        (c) => service.discard(c),
      )
      if (!up.content) throw errors.invalidField('file', FILE_REQUIRED)
      const ownerId = (await ownerField(service, up.fields.owner_id, up.content)) ?? null
      const row = await service.create(req.actor, vaultId, blobId, up.content, {
        filename: up.filename ?? '',
        mimeType: up.mimeType ?? 'application/octet-stream',
        ownerId,
      })
      return written(row)
    },
  )

  r.put(
    '/v1/vaults/:vault_id/blobs/:blob_id',
    {
      schema: {
        tags,
        summary:
          'Replace a BLOB (multipart: `file` and/or `owner_id`; or the file as the raw body)',
        params: BlobParams,
        response: WriteResponse,
      },
      // New content needs U on the BLOB; a new owner alone needs only the ownership rules (D and
      // C, never U: spec, "Ownership change"). Which one is asked is known only from the body,
      // so the route lets either through and the service checks exactly (U before storing).
      // A raw body's filename, type, size and owner are checked before the rule lets it through.
      preValidation: checkRawUpload,
      config: {
        blobUpload: true,
        openapi: { body: ReplaceUploadBody, querystring: RawUploadQuery },
        operation: 'blob.replace',
        access: { policy: (req) => ({ anyOf: [anyItem('U')(req), anyItem('D')(req)] }) },
      },
    },
    async (req) => {
      const row = await service.find(req.actor, vaultOf(req), blobOf(req))
      const up = await receiveBlob(
        req,
        (file) => {
          service.assertCanReplace(req.actor, row)
          return service.storeContent(row.account_id, row.vault_id, row.id, file)
        },
        (c) => service.discard(c),
      )
      const ownerId = await ownerField(service, up.fields.owner_id, up.content)
      if (!up.content && ownerId === undefined)
        throw errors.invalidField('file', `or owner_id is required (${FILE_REQUIRED})`)
      const updated = await service.update(req.actor, row, {
        ...(up.content ? { content: up.content } : {}),
        ...(up.filename !== undefined ? { filename: up.filename } : {}),
        ...(up.mimeType !== undefined ? { mimeType: up.mimeType } : {}),
        ...(ownerId !== undefined ? { ownerId } : {}),
      })
      return written(updated)
    },
  )
}
