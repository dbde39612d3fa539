import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { reportReturned } from '../../access/returned.js'
import { readFormBodyOnGet } from '../../http/bodyless-form.js'
import { clientGoneAlready } from '../../http/connections.js'
import { errors } from '../../lib/errors.js'
import { decodeBase64Json } from '../../lib/input.js'
import { resource } from '../../policy/index.js'
import {
  DocumentedSearchBody,
  SearchForm,
  UserSearchResponse,
  VaultParams,
  VaultSearchResponse,
} from './search.schemas.js'
import type { SearchService } from './search.service.js'
import { CARRIES_SEARCH_OPTION, searchOptionConstraint } from './search-option-constraint.js'
import { type OptionShape, parseOptionShape } from './search-options.js'

const tags = ['search']
const vaultOf = (req: FastifyRequest) => (req.params as { vault_id: string }).vault_id.toLowerCase()

/**
 * The option as clients send it: the form field `search_option` (base64 JSON; the SDK sends
 * multipart), or a JSON body that is the raw option object (the Go client).
 */
function optionOf(req: FastifyRequest): unknown {
  const body = (req.body ?? {}) as Record<string, unknown>
  const field = body.search_option
  if (field !== undefined)
    return typeof field === 'object' ? field : decodeBase64Json(field, 'search_option')
  if (req.headers['content-type']?.includes('json') && Object.keys(body).length > 0) return body
  throw errors.invalidField('search_option', 'is required')
}

/**
 * Aborts when the client goes away before its answer is written, so the search service can
 * cancel the query it is running (on PostgreSQL it would otherwise run on, holding a backend).
 */
function clientGone(req: FastifyRequest, reply: FastifyReply): AbortSignal {
  const controller = new AbortController()
  if (clientGoneAlready(req)) controller.abort()
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) controller.abort()
  })
  return controller.signal
}

/**
 * The option is checked before the policy (decisions.md 25: body 400s come before 401s), kept
 * per request until the handler runs.
 */
function parsedOptions(kind: 'vault' | 'users') {
  const parsed = new WeakMap<FastifyRequest, OptionShape>()
  return {
    preValidation: async (req: FastifyRequest) => {
      parsed.set(req, parseOptionShape(optionOf(req), kind))
    },
    get: (req: FastifyRequest) => parsed.get(req) as OptionShape,
  }
}

export async function searchRoutes(app: FastifyInstance, search: SearchService): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  const vaultOption = parsedOptions('vault')
  // One definition for the search route and its legacy aliases below: same option parsing and
  // limits, same access rule, same service call (and so the same time bound and cancellation).
  const vaultSearch = {
    preValidation: vaultOption.preValidation,
    config: {
      form: true,
      // A read sent as a POST: served while free space is under the floor.
      storesData: false,
      // R on the vault's Search resource, and some read on its documents (results are then
      // limited to the readable ones).
      access: {
        policy: (req: FastifyRequest) => ({
          allOf: [
            { activity: 'R' as const, resource: resource('Vault', vaultOf(req), 'Search', '') },
            { readAny: resource('Vault', vaultOf(req), 'Document', '') },
          ],
        }),
      },
    },
    handler: async (req: FastifyRequest, reply: FastifyReply) => {
      const option = vaultOption.get(req)
      const data = await search.searchVault(req.actor, vaultOf(req), option, clientGone(req, reply))
      reportReturned(req, { items: data.documents.length, full: option.full })
      return { data }
    },
  }
  const summary = "Search a vault's documents under a schema (docs/search.md)"
  const documentedBody = { openapi: { body: DocumentedSearchBody } }
  r.post('/v1/vaults/:vault_id/search', {
    ...vaultSearch,
    config: { ...vaultSearch.config, ...documentedBody, operation: 'document.search' },
    schema: { tags, summary, params: VaultParams, body: SearchForm, response: VaultSearchResponse },
  })

  // Legacy aliases (docs/truevault-clients.md §3): `search_option` in the query string or a form
  // body, on the vault's own path. Trailing slashes are not ignored (app.ts), so both spellings are
  // routes. The GETs are taken only by requests carrying a search option (see the constraint): a
  // plain `GET /v1/vaults/{id}` still reads the vault, and `GET /v1/vaults/{id}/` stays 404.
  const legacy = `${summary}; legacy alias of POST /v1/vaults/{vault_id}/search`
  app.addConstraintStrategy(searchOptionConstraint)
  r.post('/v1/vaults/:vault_id/', {
    ...vaultSearch,
    config: { ...vaultSearch.config, ...documentedBody, operation: 'document.search_legacy' },
    schema: {
      tags,
      summary: legacy,
      deprecated: true,
      params: VaultParams,
      body: SearchForm,
      response: VaultSearchResponse,
    },
  })
  for (const url of ['/v1/vaults/:vault_id/', '/v1/vaults/:vault_id']) {
    r.get(url, {
      ...vaultSearch,
      config: { ...vaultSearch.config, operation: 'document.search_legacy_query' },
      constraints: { searchOption: CARRIES_SEARCH_OPTION },
      // A GET body is not parsed by Fastify; legacy clients may send the option in one.
      preParsing: readFormBodyOnGet,
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: legacy,
        deprecated: true,
        // The same path without the option is the vault read; OpenAPI has one operation per path.
        hide: url === '/v1/vaults/:vault_id',
        params: VaultParams,
        querystring: SearchForm,
        response: VaultSearchResponse,
      },
    })
  }

  const userOption = parsedOptions('users')
  r.post(
    '/v1/users/search',
    {
      schema: {
        tags,
        summary: 'Search the users the caller may read (docs/search.md)',
        body: SearchForm,
        response: UserSearchResponse,
      },
      preValidation: userOption.preValidation,
      config: {
        form: true,
        storesData: false,
        openapi: { body: DocumentedSearchBody },
        operation: 'user.search',
        access: { policy: () => ({ readAny: resource('User', '') }) },
      },
    },
    async (req, reply) => {
      const option = userOption.get(req)
      const data = await search.searchUsers(req.actor, option, clientGone(req, reply))
      reportReturned(req, { items: data.documents.length, full: option.full })
      return { data }
    },
  )
}
