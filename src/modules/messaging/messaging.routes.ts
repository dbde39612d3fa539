import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { USER_CREDENTIALS } from '../../http/access.js'
import { AppError, ErrorType, errors } from '../../lib/errors.js'
import { type Grants, type Requirement, resource } from '../../policy/index.js'
import { EmailBody, MessageParams, MessageResponse, SmsBody } from './messaging.schemas.js'
import type { MessagingService } from './messaging.service.js'

const tags = ['messaging']

const userId = (req: FastifyRequest) => (req.params as { user_id: string }).user_id.toLowerCase()

/** A specifier that reads the user's data (an attribute or a system field), not a literal. */
const readsUser = (spec: unknown) =>
  typeof spec === 'object' && spec !== null && !('literal_value' in spec)

/**
 * The body parameters other than the recipient that read the user's data. Their values go to the
 * caller's own template and provider account (whose logs, templates and settings such as BCC the
 * caller controls), so reading the user's data there is reading the user (reliability R-25).
 */
function paramsReadingUser(body: Record<string, unknown>): string[] {
  const subs = body.substitutions
  const values: [string, unknown[]][] = [
    ['from_email_address', [body.from_email_address]],
    ['from_number', [body.from_number]],
    ['substitutions', typeof subs === 'object' && subs !== null ? Object.values(subs) : []],
    ['media_urls', Array.isArray(body.media_urls) ? body.media_urls : []],
  ]
  return values.filter(([, specs]) => specs.some(readsUser)).map(([name]) => name)
}

const bodyOf = (req: FastifyRequest) => (req.body ?? {}) as Record<string, unknown>
const messageGrant = (req: FastifyRequest): Requirement => ({
  activity: 'C',
  resource: resource('User', userId(req), 'Message'),
})
const readGrant = (req: FastifyRequest): Requirement => ({
  activity: 'R',
  resource: resource('User', userId(req)),
})

/**
 * Spec: C on `User::USERID::Message` (or `User::.*::Message`, which the matcher covers). A message
 * whose sender, substitutions or media come from the user's data also needs R on the user: the
 * recipient alone is the user's own address, but those values reach the caller (decision 73).
 */
const canMessage = (req: FastifyRequest): Requirement =>
  paramsReadingUser(bodyOf(req)).length === 0
    ? messageGrant(req)
    : { allOf: [messageGrant(req), readGrant(req)] }

/**
 * A caller holding C on the message resource but not R on the user is told exactly that, and
 * which of its parameters need the read. The answer depends only on the body's shape and the
 * caller's grants, never on the user's data: whether an attribute exists stays unknown.
 */
function messageDenied(req: FastifyRequest, grants: Grants): AppError {
  const params = paramsReadingUser(bodyOf(req))
  if (params.length === 0 || !grants.satisfies(messageGrant(req))) return errors.permissionDenied()
  return new AppError(
    401,
    ErrorType.authorization,
    'PERMISSION_DENIED',
    `${params.join(', ')}: values taken from the user's data (user_attribute or system_field) ` +
      `need R on User::${userId(req)} besides C on User::${userId(req)}::Message, since they ` +
      "reach the caller's own template and provider account; only the recipient may come from " +
      'the user with C alone',
  )
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
      config: {
        operation: 'user.send_email',
        access: { policy: canMessage, denied: messageDenied, credentials: USER_CREDENTIALS },
      },
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
      config: {
        operation: 'user.send_sms',
        access: { policy: canMessage, denied: messageDenied, credentials: USER_CREDENTIALS },
      },
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
