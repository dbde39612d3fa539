import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { errors } from '../../lib/errors.js'
import { decodeBase64Json } from '../../lib/input.js'
import { resource } from '../../policy/index.js'
import { parseSchemaDefinition } from './schema-definition.js'
import {
  AccountParams,
  ReindexResponse,
  SchemaForm,
  SchemaListResponse,
  SchemaParams,
  SchemaResponse,
  UserSchemaResponse,
  VaultParams,
} from './schemas.schemas.js'
import type { SchemasService } from './schemas.service.js'
import type { UserSchemaService } from './user-schema.service.js'

const tags = ['schemas']
type Params = { vault_id: string; schema_id?: string; account_id?: string }
const vaultOf = (req: FastifyRequest) => (req.params as Params).vault_id.toLowerCase()
const schemaOf = (req: FastifyRequest) => ((req.params as Params).schema_id as string).toLowerCase()
const onSchema = (activity: 'R' | 'U' | 'D') => (req: FastifyRequest) => ({
  activity,
  resource: resource('Vault', vaultOf(req), 'Schema', schemaOf(req)),
})
const onUserSchema = (activity: 'C' | 'R' | 'U' | 'D') => () => ({
  activity,
  resource: resource('UserSchema', ''),
})

/** The `schema` form field: base64 of `{name, fields}`, validated. */
function definition(value: string | undefined) {
  if (value === undefined || value === '') throw errors.invalidField('schema', 'is required')
  return parseSchemaDefinition(decodeBase64Json(value, 'schema'))
}

export async function schemaRoutes(
  app: FastifyInstance,
  schemas: SchemasService,
  userSchemas: UserSchemaService,
) {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/vaults/:vault_id/schemas',
    {
      schema: {
        tags,
        summary: 'Create a schema',
        params: VaultParams,
        body: SchemaForm,
        response: SchemaResponse,
      },
      config: {
        form: true,
        operation: 'schema.create',
        access: {
          policy: (req) => ({
            activity: 'C',
            resource: resource('Vault', vaultOf(req), 'Schema', ''),
          }),
        },
      },
    },
    async (req) => ({
      schema: await schemas.create(
        req.actor.principal.accountId,
        vaultOf(req),
        definition(req.body.schema),
      ),
    }),
  )

  r.get(
    '/v1/vaults/:vault_id/schemas',
    {
      schema: {
        tags,
        summary: 'List the schemas the caller may read',
        params: VaultParams,
        response: SchemaListResponse,
      },
      config: {
        operation: 'schema.list',
        access: { policy: (req) => ({ readAny: resource('Vault', vaultOf(req), 'Schema', '') }) },
      },
    },
    async (req) => ({ schemas: await schemas.list(req.actor, vaultOf(req)) }),
  )

  r.get(
    '/v1/vaults/:vault_id/schemas/:schema_id',
    {
      schema: { tags, summary: 'Read a schema', params: SchemaParams, response: SchemaResponse },
      config: { operation: 'schema.read', access: { policy: onSchema('R') } },
    },
    async (req) => ({
      schema: await schemas.get(req.actor.principal.accountId, vaultOf(req), schemaOf(req)),
    }),
  )

  r.get(
    '/v1/vaults/:vault_id/schemas/:schema_id/reindex',
    {
      schema: {
        tags,
        summary: "How far the re-index of a schema's documents is",
        description:
          'A change of fields re-indexes the documents in the same request when they fit in one batch (200), else in batches after it; this shows how far.',
        params: SchemaParams,
        response: ReindexResponse,
      },
      config: { operation: 'schema.reindex_status', access: { policy: onSchema('R') } },
    },
    async (req) => ({
      reindex: await schemas.reindexStatus(
        req.actor.principal.accountId,
        vaultOf(req),
        schemaOf(req),
      ),
    }),
  )

  r.put(
    '/v1/vaults/:vault_id/schemas/:schema_id',
    {
      schema: {
        tags,
        summary: "Replace a schema's name and fields (re-indexes its documents)",
        params: SchemaParams,
        body: SchemaForm,
        response: SchemaResponse,
      },
      config: { form: true, operation: 'schema.update', access: { policy: onSchema('U') } },
    },
    async (req) => ({
      schema: await schemas.update(
        req.actor.principal.accountId,
        vaultOf(req),
        schemaOf(req),
        definition(req.body.schema),
      ),
    }),
  )

  r.delete(
    '/v1/vaults/:vault_id/schemas/:schema_id',
    {
      schema: {
        tags,
        summary: 'Delete a schema no document is tied to',
        params: SchemaParams,
        response: SchemaResponse,
      },
      config: { operation: 'schema.delete', access: { policy: onSchema('D') } },
    },
    async (req) => ({
      schema: await schemas.delete(req.actor.principal.accountId, vaultOf(req), schemaOf(req)),
    }),
  )

  const account = (req: FastifyRequest) => {
    const id = ((req.params as Params).account_id as string).toLowerCase()
    if (id !== req.actor.principal.accountId) throw errors.notFound('Account')
    return id
  }
  const path = '/v1/accounts/:account_id/user_schema'

  r.post(
    path,
    {
      schema: {
        tags,
        summary: 'Create the user schema (an account has one from the start)',
        params: AccountParams,
        body: SchemaForm,
        response: UserSchemaResponse,
      },
      config: {
        form: true,
        operation: 'user_schema.create',
        access: { policy: onUserSchema('C') },
      },
    },
    async (req) => ({
      user_schema: await userSchemas.create(account(req), definition(req.body.schema)),
    }),
  )
  r.get(
    path,
    {
      schema: {
        tags,
        summary: 'Read the user schema',
        params: AccountParams,
        response: UserSchemaResponse,
      },
      config: { operation: 'user_schema.read', access: { policy: onUserSchema('R') } },
    },
    async (req) => ({ user_schema: await userSchemas.get(account(req)) }),
  )
  r.put(
    path,
    {
      schema: {
        tags,
        summary: 'Replace the user schema (re-indexes every user)',
        params: AccountParams,
        body: SchemaForm,
        response: UserSchemaResponse,
      },
      config: {
        form: true,
        operation: 'user_schema.update',
        access: { policy: onUserSchema('U') },
      },
    },
    async (req) => ({
      user_schema: await userSchemas.update(account(req), definition(req.body.schema)),
    }),
  )
  r.delete(
    path,
    {
      schema: {
        tags,
        summary: 'Delete the user schema (refused while users exist)',
        params: AccountParams,
        response: UserSchemaResponse,
      },
      config: { operation: 'user_schema.delete', access: { policy: onUserSchema('D') } },
    },
    async (req) => ({ user_schema: await userSchemas.delete(account(req)) }),
  )
}
