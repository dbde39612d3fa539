import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { USER_CREDENTIALS } from '../../http/access.js'
import { errors } from '../../lib/errors.js'
import { resource } from '../../policy/index.js'
import { AccountParams, UsageQuery, UsageResponse } from './metering.schemas.js'
import { type MeteringService, parseRange } from './metering.service.js'

const accountParam = (req: FastifyRequest) =>
  (req.params as { account_id: string }).account_id.toLowerCase()

export async function meteringRoutes(app: FastifyInstance, metering: MeteringService) {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.get(
    '/v1/accounts/:account_id/usage',
    {
      schema: {
        tags: ['account settings'],
        summary: "Read the account's operations (billing units) per UTC day and category",
        params: AccountParams,
        querystring: UsageQuery,
        response: UsageResponse,
      },
      // Usage is account administration, read by whoever may read the account's settings
      // (`Account::<id>::Settings`, R); like the settings, not with a SAT.
      config: {
        operation: 'account_usage.read',
        access: {
          policy: (req) => ({
            activity: 'R',
            resource: resource('Account', accountParam(req), 'Settings'),
          }),
          credentials: USER_CREDENTIALS,
        },
      },
    },
    async (req) => {
      // Another account's usage is not there for this caller (as for its settings).
      const accountId = accountParam(req)
      if (accountId !== req.actor.principal.accountId) throw errors.notFound('Account')
      const { from, to } = parseRange(req.query)
      return { usage: { from, to, ...(await metering.usage(accountId, from, to)) } }
    },
  )
}
