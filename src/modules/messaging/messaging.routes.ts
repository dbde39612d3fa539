import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { USER_CREDENTIALS } from '../../http/access.js'
import { AppError, ErrorType } from '../../lib/errors.js'
import { type Requirement, resource } from '../../policy/index.js'
import { EmailBody, MessageParams, MessageResponse, SmsBody } from './messaging.schemas.js'
import type { MessagingService } from './messaging.service.js'

const tags = ['messaging']

const userId = (req: FastifyRequest) => (req.params as { user_id: string }).user_id.toLowerCase()

/** A specifier that reads the user's data (an attribute or a system field), not a literal. */
const readsUser = (spec: unknown) =>
  typeof spec === 'object' && spec !== null && !('literal_value' in spec)

/**
 * The specifiers other than the recipient: their values go to the caller's own provider account
 * and template, so reading the user's data there is reading the user (reliability R-25).
 */
function nonRecipientSpecs(body: Record<string, unknown>): unknown[] {
  const subs = body.substitutions
  return [
    body.from_email_address,
    body.from_number,
    ...(typeof subs === 'object' && subs !== null ? Object.values(subs) : []),
    ...(Array.isArray(body.media_urls) ? body.media_urls : []),
  ]
}

/**
 * Spec: C on `User::USERID::Message` (or `User::.*::Message`, which the matcher covers). A message
 * whose sender, substitutions or media come from the user's data also needs R on the user: the
 * recipient alone is the user's own address, but those values reach the caller's template.
 */
const canMessage = (req: FastifyRequest): Requirement => {
  const message = { activity: 'C' as const, resource: resource('User', userId(req), 'Message') }
  const body = (req.body ?? {}) as Record<string, unknown>
  if (!nonRecipientSpecs(body).some(readsUser)) return message
  return { allOf: [message, { activity: 'R', resource: resource('User', userId(req)) }] }
}

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
      config: { access: { policy: canMessage, credentials: USER_CREDENTIALS } },
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
      config: { access: { policy: canMessage, credentials: USER_CREDENTIALS } },
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
