import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { reportReturned } from '../../access/returned.js'
import { RawJson, sendWithRawJson } from '../../http/raw-json.js'
import { errors } from '../../lib/errors.js'
import { decodeBase64Json, isTrue, parseIdList } from '../../lib/input.js'
import { createItem, resource } from '../../policy/index.js'
import { optionalId, requiredContent } from './document-input.js'
import type { DocumentRow } from './documents.repo.js'
import {
  CreateV1Response,
  CreateV2Body,
  CreateV2Response,
  DeleteResponse,
  DocumentForm,
  DocumentIdsParams,
  DocumentParams,
  ListQuery,
  ListResponse,
  OwnerForm,
  OwnerResponse,
  ReadV1Response,
  ReadV2Response,
  SchemaDocumentsParams,
  UpdateV2Body,
  UpdateV2Response,
  VaultParams,
} from './documents.schemas.js'
import { type DocumentsService, MAX_IDS_PER_READ } from './documents.service.js'

const tags = ['documents']
type Params = { vault_id: string; document_id?: string; document_ids?: string; schema_id?: string }
const params = (req: FastifyRequest) => req.params as Params
const vaultOf = (req: FastifyRequest) => params(req).vault_id.toLowerCase()
const docOf = (req: FastifyRequest) => (params(req).document_id as string).toLowerCase()
const collection = (req: FastifyRequest) => ['Vault', vaultOf(req), 'Document']
const anyItem = (activity: 'R' | 'U' | 'D') => (req: FastifyRequest) => ({
  anyItem: { activity, collection: resource(...collection(req), '') },
})
const readAny = (req: FastifyRequest) => ({ readAny: resource(...collection(req), '') })

const meta = (row: DocumentRow) => ({
  id: row.id,
  vault_id: row.vault_id,
  owner_id: row.owner_id,
  schema_id: row.schema_id,
})

export async function documentRoutes(
  app: FastifyInstance,
  documents: DocumentsService,
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  // Create: unowned needs C on the collection, owned by X needs C on `…::$[Owner=X]`.
  const createPolicy = (v1: boolean) => (req: FastifyRequest) => {
    const raw = (req.body as { owner_id?: unknown }).owner_id
    return createItem(
      collection(req),
      optionalId(v1 && raw === '' ? null : raw, 'owner_id') ?? null,
    )
  }

  r.post(
    '/v2/vaults/:vault_id/documents',
    {
      schema: {
        tags,
        summary: 'Create a document (JSON)',
        params: VaultParams,
        body: CreateV2Body,
        response: CreateV2Response,
      },
      config: { operation: 'document.create_v2', access: { policy: createPolicy(false) } },
    },
    async (req) => {
      const row = await documents.create(req.actor, vaultOf(req), {
        content: req.body.document,
        schemaId: optionalId(req.body.schema_id, 'schema_id') ?? undefined,
        ownerId: optionalId(req.body.owner_id, 'owner_id') ?? null,
      })
      return { document: meta(row), document_id: row.id }
    },
  )

  r.post(
    '/v1/vaults/:vault_id/documents',
    {
      schema: {
        tags,
        summary: 'Create a document (deprecated form, base64 content)',
        deprecated: true,
        params: VaultParams,
        body: DocumentForm,
        response: CreateV1Response,
      },
      config: { form: true, operation: 'document.create', access: { policy: createPolicy(true) } },
    },
    async (req) => {
      const b = req.body
      const row = await documents.create(req.actor, vaultOf(req), {
        content: requiredContent(b.document, decodeBase64Json),
        schemaId: optionalId(b.schema_id, 'schema_id') ?? undefined,
        ownerId: optionalId(b.owner_id, 'owner_id') ?? null,
      })
      return { document_id: row.id }
    },
  )

  r.get(
    '/v2/vaults/:vault_id/documents/:document_ids',
    {
      schema: {
        tags,
        summary: 'Read documents by id (comma-separated)',
        params: DocumentIdsParams,
        response: ReadV2Response,
      },
      config: { operation: 'document.read_v2', access: { policy: readAny } },
    },
    async (req, reply) => {
      const ids = idsOf(req.params.document_ids)
      const docs = await documents.getMany(req.actor, vaultOf(req), ids)
      reportReturned(req, { items: docs.length, full: true })
      // The content goes out as the JSON text it is stored as (no parse and stringify again).
      return sendWithRawJson(reply, {
        documents: docs.map(({ row, json }) => ({
          ...meta(row),
          document: new RawJson(json.toString('utf8')),
        })),
      })
    },
  )

  r.get(
    '/v1/vaults/:vault_id/documents/:document_ids',
    {
      schema: {
        tags,
        summary: 'Read documents (deprecated): one id answers only the base64 text, no JSON',
        deprecated: true,
        params: DocumentIdsParams,
        response: ReadV1Response,
      },
      config: { operation: 'document.read', access: { policy: readAny } },
    },
    async (req, reply) => {
      const ids = idsOf(req.params.document_ids)
      const docs = await documents.getMany(req.actor, vaultOf(req), ids)
      reportReturned(req, { items: docs.length, full: true })
      // Old SDKs asked for the same id twice to get the array form: count the ids as sent.
      const requested = req.params.document_ids.split(',').filter((id) => id.trim() !== '').length
      if (requested === 1 && docs[0]) {
        // The deprecated single read answers the bare base64 text (docs/truevault-clients.md §4)
        // typed as TrueVault typed it: Ruby clients decode the body only as
        // application/octet-stream.
        return reply.type('application/octet-stream').send(docs[0].json.toString('base64'))
      }
      return {
        documents: docs.map(({ row, json }) => ({
          id: row.id,
          owner_id: row.owner_id,
          schema_id: row.schema_id,
          document: json.toString('base64'),
        })),
      }
    },
  )

  const list = async (req: FastifyRequest, schemaId?: string) => {
    const q = req.query as { full?: string; page?: number; per_page?: number }
    const full = isTrue(q.full)
    const page = q.page ?? 1
    const perPage = q.per_page ?? 100
    const { items, total } = await documents.list(req.actor, vaultOf(req), {
      page,
      perPage,
      full,
      ...(schemaId !== undefined ? { schemaId } : {}),
    })
    reportReturned(req, { items: items.length, full })
    return {
      data: {
        items: items.map(({ row, json }) => ({
          ...meta(row),
          ...(json ? { document: json.toString('base64') } : {}),
        })),
        page,
        per_page: perPage,
        total,
        full_document: full,
      },
    }
  }

  r.get(
    '/v1/vaults/:vault_id/documents',
    {
      schema: {
        tags,
        summary: 'List the documents the caller may read',
        params: VaultParams,
        querystring: ListQuery,
        response: ListResponse,
      },
      config: { operation: 'document.list', access: { policy: readAny } },
    },
    (req) => list(req),
  )

  r.get(
    '/v1/vaults/:vault_id/schemas/:schema_id/documents',
    {
      schema: {
        tags,
        summary: "List a schema's documents the caller may read",
        params: SchemaDocumentsParams,
        querystring: ListQuery,
        response: ListResponse,
      },
      config: { operation: 'document.list_by_schema', access: { policy: readAny } },
    },
    (req) => list(req, (params(req).schema_id as string).toLowerCase()),
  )

  r.put(
    '/v2/vaults/:vault_id/documents/:document_id',
    {
      schema: {
        tags,
        summary: 'Update a document (JSON)',
        params: DocumentParams,
        body: UpdateV2Body,
        response: UpdateV2Response,
      },
      config: { operation: 'document.update_v2', access: { policy: anyItem('U') } },
    },
    async (req) => {
      if (req.body.document === undefined) throw errors.invalidField('document', 'is required')
      const schemaId = optionalId(req.body.schema_id, 'schema_id')
      const ownerId = optionalId(req.body.owner_id, 'owner_id')
      const row = await documents.update(req.actor, vaultOf(req), docOf(req), {
        content: req.body.document,
        ...(schemaId !== undefined ? { schemaId } : {}),
        ...(ownerId !== undefined ? { ownerId } : {}),
      })
      return { document: meta(row), document_id: row.id }
    },
  )

  r.put(
    '/v1/vaults/:vault_id/documents/:document_id',
    {
      schema: {
        tags,
        summary: 'Update a document (deprecated form)',
        deprecated: true,
        params: DocumentParams,
        body: DocumentForm,
        response: OwnerResponse,
      },
      config: { form: true, operation: 'document.update', access: { policy: anyItem('U') } },
    },
    async (req) => {
      const b = req.body
      const schemaId = b.schema_id === '' ? undefined : optionalId(b.schema_id, 'schema_id')
      const ownerId = optionalId(b.owner_id, 'owner_id')
      const row = await documents.update(req.actor, vaultOf(req), docOf(req), {
        content: requiredContent(b.document, decodeBase64Json),
        ...(schemaId !== undefined ? { schemaId } : {}),
        ...(ownerId !== undefined ? { ownerId } : {}),
      })
      return { document: meta(row), document_id: row.id, owner_id: row.owner_id }
    },
  )

  r.put(
    '/v1/vaults/:vault_id/documents/:document_id/owner',
    {
      schema: {
        tags,
        summary: "Set or remove a document's owner",
        params: DocumentParams,
        body: OwnerForm,
        response: OwnerResponse,
      },
      config: { form: true, operation: 'document.update_owner', access: { policy: anyItem('D') } },
    },
    async (req) => {
      const ownerId = optionalId(req.body.owner_id, 'owner_id')
      if (ownerId === undefined)
        throw errors.invalidField('owner_id', 'is required (empty removes the owner)')
      const row = await documents.update(req.actor, vaultOf(req), docOf(req), { ownerId })
      return { document: meta(row), document_id: row.id, owner_id: row.owner_id }
    },
  )

  r.post(
    '/v1/vaults/:vault_id/documents/:document_id/reindex',
    {
      schema: {
        tags,
        summary: "Rebuild a document's search index entries (API key only)",
        params: DocumentParams,
        response: CreateV1Response,
      },
      config: {
        operation: 'document.reindex',
        access: { policy: anyItem('U'), credentials: ['api_key'] },
      },
    },
    async (req) => ({
      document_id: (await documents.reindex(req.actor, vaultOf(req), docOf(req))).id,
    }),
  )

  r.delete(
    '/v1/vaults/:vault_id/documents/:document_id',
    {
      schema: {
        tags,
        summary: 'Delete a document',
        params: DocumentParams,
        response: DeleteResponse,
      },
      config: { operation: 'document.delete', access: { policy: anyItem('D') } },
    },
    async (req) => {
      const row = await documents.delete(req.actor, vaultOf(req), docOf(req))
      return { document_id: row.id, owner_id: row.owner_id }
    },
  )
}

function idsOf(text: string): string[] {
  const ids = parseIdList(text, 'document_ids', MAX_IDS_PER_READ)
  if (ids.length === 0) throw errors.invalidField('document_ids', 'must name at least one document')
  return ids
}
