import { errors } from '../../lib/errors.js'
import type { UsersService } from '../users/users.service.js'
import {
  checkEmail,
  checkMediaUrl,
  checkRecipientNumber,
  checkSenderNumber,
} from './address-checks.js'
import {
  type EmailInput,
  parseEmailInput,
  parseSmsInput,
  resolveSubstitutions,
  type SmsInput,
} from './message-input.js'
import type { MessageRateLimit } from './message-rate-limit.js'
import { EMAIL_FAILED, providerFailure, SMS_FAILED } from './provider-failure.js'
import type { SendGridClient } from './sendgrid.client.js'
import type { TwilioClient } from './twilio.client.js'
import { resolveValueSpec, type ValueSpecTarget } from './value-spec.js'

/**
 * Sends one email or SMS to a stored user through the provider the caller names, with the
 * caller's provider credentials (used for that request only: never stored, never logged).
 * The recipient is always the user's own attribute or username, so whatever the message carries
 * about the user goes to that user alone.
 */
export class MessagingService {
  constructor(
    private readonly users: UsersService,
    private readonly sendgrid: SendGridClient,
    private readonly twilio: TwilioClient,
    private readonly rateLimit: MessageRateLimit,
  ) {}

  /** The user's username and decrypted attributes: 404 when unknown, 400 when DEACTIVATED. */
  async target(accountId: string, userId: string): Promise<ValueSpecTarget> {
    const row = await this.users.get(accountId, userId)
    if (row.status === 'DEACTIVATED')
      throw errors.badRequest('USER_DEACTIVATED', 'The user is DEACTIVATED')
    const attributes: unknown = JSON.parse(await this.users.attributesJson(row))
    return { username: row.username, attributes }
  }

  /** POST /v1/users/{id}/message/email: returns SendGrid's message id. */
  async sendEmail(accountId: string, userId: string, input: EmailInput): Promise<string> {
    const plan = parseEmailInput(input)
    const user = await this.target(accountId, userId)
    const to = checkEmail(resolveValueSpec(plan.to, user, 'to_email_address'), 'to_email_address')
    const from = checkEmail(
      resolveValueSpec(plan.from, user, 'from_email_address'),
      'from_email_address',
    )
    const substitutions = resolveSubstitutions(plan.substitutions, user)
    try {
      await this.rateLimit.take(accountId, userId)
      const sent = await this.sendgrid.sendTemplate({
        apiKey: plan.apiKey,
        templateId: plan.templateId,
        from,
        to,
        substitutions,
      })
      return sent.providerMessageId
    } catch (e) {
      throw providerFailure(e, EMAIL_FAILED)
    }
  }

  /** POST /v1/users/{id}/message/sms: returns Twilio's message sid. */
  async sendSms(accountId: string, userId: string, input: SmsInput): Promise<string> {
    const plan = parseSmsInput(input)
    const user = await this.target(accountId, userId)
    const to = checkRecipientNumber(resolveValueSpec(plan.to, user, 'to_number'), 'to_number')
    const from = checkSenderNumber(resolveValueSpec(plan.from, user, 'from_number'), 'from_number')
    const mediaUrls = plan.mediaUrls.map((spec, i) =>
      checkMediaUrl(resolveValueSpec(spec, user, `media_urls.${i}`), `media_urls.${i}`),
    )
    try {
      await this.rateLimit.take(accountId, userId)
      const sent = await this.twilio.sendMessage({
        accountSid: plan.accountSid,
        username: plan.username,
        password: plan.password,
        from,
        to,
        body: plan.body,
        mediaUrls,
      })
      return sent.providerMessageId
    } catch (e) {
      throw providerFailure(e, SMS_FAILED)
    }
  }
}
