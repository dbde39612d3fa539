import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance } from 'fastify'
import { USER_CREDENTIALS } from '../../http/access.js'
import { type Requirement, resource } from '../../policy/index.js'
import { AccessQuery, AccessResponse, ExplainBody, ExplainResponse } from './simulator.schemas.js'
import type { PolicySimulatorService } from './simulator.service.js'

const tags = ['policy']

/**
 * The policy simulator (issue 15): an admin-only resource `PolicySimulator::` with R (the
 * bootstrap admin group has it; migration 0017 gives it to earlier admin groups). API keys and
 * access tokens only: the answers show every group's policy and every user's rights, which a
 * narrow, often handed-out SAT has no business reading.
 */
const simulator = (): Requirement => ({ activity: 'R', resource: resource('PolicySimulator', '') })

export async function policySimulatorRoutes(
  app: FastifyInstance,
  service: PolicySimulatorService,
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  r.post(
    '/v1/policy/explain',
    {
      schema: {
        tags,
        summary:
          "Which activities a user's groups (or a pasted policy) allow on a resource, and which statement of which group allows each",
        body: ExplainBody,
        response: ExplainResponse,
      },
      config: {
        operation: 'policy.explain',
        access: { policy: simulator, credentials: USER_CREDENTIALS },
      },
    },
    async (req) => ({
      explanation: await service.explain(req.actor.principal.accountId, req.body),
    }),
  )

  r.get(
    '/v1/policy/access',
    {
      schema: {
        tags,
        summary:
          'Every user of the account who may do anything on a resource, and the granting statements',
        querystring: AccessQuery,
        response: AccessResponse,
      },
      config: {
        operation: 'policy.access',
        access: { policy: simulator, credentials: USER_CREDENTIALS },
      },
    },
    async (req) => ({
      data: await service.access(
        req.actor.principal.accountId,
        req.query.resource,
        req.query.page ?? 1,
        req.query.per_page ?? 100,
      ),
    }),
  )
}
