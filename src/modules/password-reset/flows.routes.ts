import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { resource } from '../../policy/index.js'
import {
  EmptyResponse,
  FlowBody,
  FlowListResponse,
  FlowParams,
  FlowResponse,
  LinkSatBody,
  SendEmailBody,
} from './flows.schemas.js'
import { flowResource, type PasswordResetFlowsService } from './flows.service.js'

const tags = ['password reset flows']
const flowId = (req: FastifyRequest) => (req.params as { flow_id: string }).flow_id.toLowerCase()
const onFlow = (activity: 'R' | 'U' | 'D') => (req: FastifyRequest) => ({
  activity,
  resource: flowResource(flowId(req)),
})

export async function passwordResetRoutes(
  app: FastifyInstance,
  flows: PasswordResetFlowsService,
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/password_reset_flows',
    {
      schema: {
        tags,
        summary: 'Create a password reset flow',
        body: FlowBody,
        response: FlowResponse,
      },
      config: {
        operation: 'password_reset_flow.create',
        access: { policy: () => ({ activity: 'C', resource: resource('PasswordResetFlow', '') }) },
      },
    },
    async (req) => ({ password_reset_flow: await flows.create(req.actor, req.body ?? {}) }),
  )

  r.get(
    '/v1/password_reset_flows',
    {
      schema: {
        tags,
        summary: 'List the password reset flows the caller may read',
        response: FlowListResponse,
      },
      config: {
        operation: 'password_reset_flow.list',
        access: { policy: () => ({ readAny: resource('PasswordResetFlow', '') }) },
      },
    },
    async (req) => ({ password_reset_flows: await flows.list(req.actor) }),
  )

  r.get(
    '/v1/password_reset_flows/:flow_id',
    {
      schema: {
        tags,
        summary: 'Read a password reset flow',
        params: FlowParams,
        response: FlowResponse,
      },
      config: { operation: 'password_reset_flow.read', access: { policy: onFlow('R') } },
    },
    async (req) => ({
      password_reset_flow: await flows.get(req.actor.principal.accountId, flowId(req)),
    }),
  )

  r.delete(
    '/v1/password_reset_flows/:flow_id',
    {
      schema: {
        tags,
        summary: 'Delete a password reset flow',
        params: FlowParams,
        response: FlowResponse,
      },
      config: { operation: 'password_reset_flow.delete', access: { policy: onFlow('D') } },
    },
    async (req) => ({
      password_reset_flow: await flows.delete(req.actor.principal.accountId, flowId(req)),
    }),
  )

  r.post(
    '/v1/password_reset_flows/:flow_id/email',
    {
      schema: {
        tags,
        summary: 'Email a user a password reset link (same answer for unknown usernames)',
        params: FlowParams,
        body: SendEmailBody,
        response: EmptyResponse,
      },
      config: {
        operation: 'password_reset_flow.send_email',
        access: {
          // The user is looked up after the answer: here, the caller must be allowed for some user.
          policy: (req) => ({
            anyItem: {
              activity: 'C',
              collection: resource('PasswordResetFlow', flowId(req), 'Email', ''),
            },
          }),
        },
      },
    },
    async (req) => {
      await flows.sendResetEmail(req.actor, flowId(req), req.body?.username)
      return {}
    },
  )

  r.post(
    '/v1/password_reset_flows/:flow_id/link_sat',
    {
      schema: {
        tags,
        summary: 'Bound the flow’s reset tokens by a scoped access token the caller manages',
        params: FlowParams,
        body: LinkSatBody,
        response: FlowResponse,
      },
      config: { operation: 'password_reset_flow.link_sat', access: { policy: onFlow('U') } },
    },
    async (req) => ({
      password_reset_flow: await flows.linkSat(
        req.actor,
        flowId(req),
        req.body?.scoped_access_token_id,
      ),
    }),
  )
}
