import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance } from 'fastify'
import { USER_CREDENTIALS } from '../../http/access.js'
import { resource } from '../../policy/index.js'
import { AuditListResponse, AuditQuery } from './audit.schemas.js'
import type { AuditService } from './audit.service.js'

const tags = ['audit']

/**
 * `GET /v1/audit_events`: the caller's own account's events, newest first, filtered and paged.
 * Policy resource `Audit::` with R (the bootstrap admin group has it). API keys and access
 * tokens only: a SAT is a narrow, often handed-out credential, and the trail names every
 * user and credential of the account.
 */
export async function auditRoutes(app: FastifyInstance, audit: AuditService): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  r.get(
    '/v1/audit_events',
    {
      schema: {
        tags,
        summary: "List the account's audit events (newest first)",
        querystring: AuditQuery,
        response: AuditListResponse,
      },
      config: {
        operation: 'audit_event.list',
        access: {
          policy: () => ({ activity: 'R', resource: resource('Audit', '') }),
          credentials: USER_CREDENTIALS,
        },
      },
    },
    async (req) => {
      const q = req.query
      const iso = (t: string | undefined) =>
        t === undefined ? undefined : new Date(t).toISOString()
      const from = iso(q.from)
      const to = iso(q.to)
      return {
        data: await audit.list(
          req.actor.principal.accountId,
          {
            ...(from !== undefined ? { from } : {}),
            ...(to !== undefined ? { to } : {}),
            ...(q.actor_user_id !== undefined
              ? { actorUserId: q.actor_user_id.toLowerCase() }
              : {}),
            ...(q.resource_id !== undefined ? { resourceId: q.resource_id } : {}),
            ...(q.decision !== undefined ? { decision: q.decision } : {}),
            ...(q.operation !== undefined ? { operation: q.operation } : {}),
            ...(q.route !== undefined ? { route: q.route } : {}),
          },
          q.page ?? 1,
          q.per_page ?? 100,
        ),
      }
    },
  )
}
