import { errors } from '../../lib/errors.js'
import type { UsersService } from '../users/users.service.js'
import {
  checkEmail,
  checkMediaUrl,
  checkRecipientNumber,
  checkSenderNumber,
} from './address-checks.js'
import { type EmailInput, parseEmailInput, parseSmsInput, type SmsInput } from './message-input.js'
import type { MessageRateLimit } from './message-rate-limit.js'
import {
  asIs,
  checkLiteralValues,
  type MessageValue,
  resolveMessageValues,
} from './message-values.js'
import { EMAIL_FAILED, providerFailure, SMS_FAILED } from './provider-failure.js'
import type { SendGridClient } from './sendgrid.client.js'
import type { TwilioClient } from './twilio.client.js'
import type { ValueSpecTarget } from './value-spec.js'

/**
 * Sends one email or SMS to a stored user through the provider the caller names, with the
 * caller's provider credentials (used for that request only: never stored, never logged).
 * The recipient is always the user's own attribute or username, so whatever the message carries
 * about the user goes to that user alone. The order below is what keeps the user's data from
 * the caller (message-values.ts): literals checked, user read, rate limit counted, values from
 * the user resolved with one answer for all failures, provider errors stripped of them.
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

  /** The user, once the literals are known good and the message has been counted against the limit. */
  private async countedTarget(
    accountId: string,
    userId: string,
    values: readonly MessageValue[],
  ): Promise<ValueSpecTarget> {
    checkLiteralValues(values)
    const user = await this.target(accountId, userId)
    await this.rateLimit.take(accountId, userId)
    return user
  }

  /** POST /v1/users/{id}/message/email: returns SendGrid's message id. */
  async sendEmail(accountId: string, userId: string, input: EmailInput): Promise<string> {
    const plan = parseEmailInput(input)
    const values: MessageValue[] = [
      { field: 'to_email_address', spec: plan.to, check: checkEmail },
      { field: 'from_email_address', spec: plan.from, check: checkEmail },
      ...plan.substitutions.map(([key, spec]) => ({
        field: `substitutions.${key}`,
        spec,
        check: asIs,
      })),
    ]
    const user = await this.countedTarget(accountId, userId, values)
    const { texts, fromUser } = resolveMessageValues(values, user)
    const [to = '', from = '', ...substituted] = texts
    const substitutions: Record<string, string> = Object.create(null)
    plan.substitutions.forEach(([key], i) => {
      substitutions[key] = substituted[i] ?? ''
    })
    try {
      const sent = await this.sendgrid.sendTemplate({
        apiKey: plan.apiKey,
        templateId: plan.templateId,
        from,
        to,
        substitutions,
      })
      return sent.providerMessageId
    } catch (e) {
      throw providerFailure(e, EMAIL_FAILED, fromUser)
    }
  }

  /** POST /v1/users/{id}/message/sms: returns Twilio's message sid. */
  async sendSms(accountId: string, userId: string, input: SmsInput): Promise<string> {
    const plan = parseSmsInput(input)
    const values: MessageValue[] = [
      { field: 'to_number', spec: plan.to, check: checkRecipientNumber },
      { field: 'from_number', spec: plan.from, check: checkSenderNumber },
      ...plan.mediaUrls.map((spec, i) => ({
        field: `media_urls.${i}`,
        spec,
        check: checkMediaUrl,
      })),
    ]
    const user = await this.countedTarget(accountId, userId, values)
    const { texts, fromUser } = resolveMessageValues(values, user)
    const [to = '', from = '', ...mediaUrls] = texts
    try {
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
      throw providerFailure(e, SMS_FAILED, fromUser)
    }
  }
}
