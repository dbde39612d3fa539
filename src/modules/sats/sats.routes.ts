import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Principal } from '../../access/principal.js'
import { ANY_CREDENTIAL } from '../../http/access.js'
import { errors } from '../../lib/errors.js'
import {
  CreatedSatResponse,
  DeletedResponse,
  SatBody,
  SatListResponse,
  SatPageQuery,
  SatParams,
  SatResponse,
} from './sats.schemas.js'
import { type SatsService, satIdOf } from './sats.service.js'

const tags = ['scoped access tokens']
/** Any credential may manage its own SATs (spec: API_KEY, ACCESS_TOKEN or SCOPED_ACCESS_TOKEN). */
const access = { self: true as const, credentials: ANY_CREDENTIAL }

const caller = (req: FastifyRequest) => req.principal as Principal
/** An id in the path that is no SAT id cannot name one of the caller's tokens. */
function tokenId(req: FastifyRequest): string {
  const raw = (req.params as { token_id: string }).token_id
  const id = satIdOf(raw) ?? satIdOf(`sat-${raw}`)
  if (!id) throw errors.notFound('Scoped access token')
  return id
}

export async function satRoutes(app: FastifyInstance, sats: SatsService): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/scoped_access_tokens',
    {
      schema: {
        tags,
        summary: 'Create a scoped access token (its secret is shown only here)',
        body: SatBody,
        response: CreatedSatResponse,
      },
      config: { operation: 'scoped_access_token.create', access },
      // Before the request is let through: refusing a limited token must not spend its use.
      preValidation: async (req) => sats.assertMayMint(caller(req)),
    },
    async (req) => ({ scoped_access_token: await sats.create(caller(req), req.body ?? {}) }),
  )

  r.get(
    '/v1/scoped_access_tokens',
    {
      schema: {
        tags,
        summary: "List the caller's scoped access tokens (no secrets)",
        querystring: SatPageQuery,
        response: SatListResponse,
      },
      config: { operation: 'scoped_access_token.list', access },
    },
    async (req) => ({
      data: await sats.list(caller(req), req.query.page ?? 1, req.query.per_page ?? 100),
    }),
  )

  r.get(
    '/v1/scoped_access_tokens/:token_id',
    {
      schema: {
        tags,
        summary: 'Read a scoped access token',
        params: SatParams,
        response: SatResponse,
      },
      config: { operation: 'scoped_access_token.read', access },
    },
    async (req) => ({ scoped_access_token: await sats.get(caller(req), tokenId(req)) }),
  )

  r.delete(
    '/v1/scoped_access_tokens/:token_id',
    {
      schema: {
        tags,
        summary: 'Delete (revoke) a scoped access token and every token it minted',
        params: SatParams,
        response: DeletedResponse,
      },
      config: { operation: 'scoped_access_token.delete', access },
    },
    async (req) => {
      await sats.delete(caller(req), tokenId(req))
      return {}
    },
  )
}
