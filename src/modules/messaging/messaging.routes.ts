import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError, ErrorType } from '../../lib/errors.js'
import { type Requirement, resource } from '../../policy/index.js'
import { EmailBody, MessageParams, MessageResponse, SmsBody } from './messaging.schemas.js'
import type { MessagingService } from './messaging.service.js'

const tags = ['messaging']

const userId = (req: FastifyRequest) => (req.params as { user_id: string }).user_id.toLowerCase()

/** Spec: C on `User::USERID::Message` (or `User::.*::Message`, which the matcher covers). */
const canMessage = (req: FastifyRequest): Requirement => ({
  activity: 'C',
  resource: resource('User', userId(req), 'Message'),
})

/**
 * The spec requires `Content-Type: application/json`. Without this a urlencoded body would reach
 * validation and be refused for a "missing" field it may well hold.
 */
async function requireJson(req: FastifyRequest): Promise<void> {
  const type = req.headers['content-type']?.split(';')[0]?.trim().toLowerCase()
  if (type !== 'application/json') {
    throw new AppError(
      415,
      ErrorType.invalidRequest,
      'UNSUPPORTED_MEDIA_TYPE',
      'Content-Type must be application/json',
    )
  }
}

export async function messagingRoutes(
  app: FastifyInstance,
  messaging: MessagingService,
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()

  r.post(
    '/v1/users/:user_id/message/email',
    {
      schema: {
        tags,
        summary: 'Email a user through SendGrid with a template (JSON)',
        params: MessageParams,
        body: EmailBody,
        response: MessageResponse,
      },
      preValidation: requireJson,
      config: { access: { policy: canMessage } },
    },
    async (req) => ({
      provider_message_id: await messaging.sendEmail(
        req.actor.principal.accountId,
        userId(req),
        req.body,
      ),
    }),
  )

  r.post(
    '/v1/users/:user_id/message/sms',
    {
      schema: {
        tags,
        summary: 'Text a user through Twilio (JSON)',
        params: MessageParams,
        body: SmsBody,
        response: MessageResponse,
      },
      preValidation: requireJson,
      config: { access: { policy: canMessage } },
    },
    async (req) => ({
      provider_message_id: await messaging.sendSms(
        req.actor.principal.accountId,
        userId(req),
        req.body,
      ),
    }),
  )
}
