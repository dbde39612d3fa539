import { callProvider, ProviderError } from './provider-http.js'
import { dynamicTemplateData, isDynamicTemplate } from './sendgrid-template-data.js'

export interface SendGridOptions {
  /** `https://api.sendgrid.com` in production; configuration, never caller-supplied. */
  baseUrl: string
  timeoutMs: number
}

export interface SendGridTemplateMessage {
  /** Used for this one request: never stored or logged here. */
  apiKey: string
  templateId: string
  from: string
  to: string
  /**
   * Keys exactly as written in the template (`{{name}}`): sent as legacy `substitutions`, or as
   * `dynamic_template_data` for a dynamic template (`d-…`, see sendgrid-template-data.ts).
   */
  substitutions: Record<string, string>
}

/**
 * SendGrid's v3 Mail Send (`POST /v3/mail/send`) with a template: one personalization to one
 * recipient. SendGrid answers 202 with an empty body and the message id in `X-Message-Id`.
 * Shared by the messaging endpoint and password reset flows.
 */
export class SendGridClient {
  readonly #url: string
  readonly #timeoutMs: number

  constructor(options: SendGridOptions) {
    this.#url = `${options.baseUrl.replace(/\/+$/, '')}/v3/mail/send`
    this.#timeoutMs = options.timeoutMs
  }

  /** Sends the message; throws a ProviderError when SendGrid refuses it or cannot be reached. */
  async sendTemplate(message: SendGridTemplateMessage): Promise<{ providerMessageId: string }> {
    const personalization: Record<string, unknown> = { to: [{ email: message.to }] }
    // Sent only when there are some: an empty object is noise in SendGrid's eyes.
    if (Object.keys(message.substitutions).length > 0) {
      if (isDynamicTemplate(message.templateId))
        personalization.dynamic_template_data = dynamicTemplateData(message.substitutions)
      else personalization.substitutions = message.substitutions
    }
    const answer = await callProvider({
      provider: 'SendGrid',
      url: this.#url,
      init: {
        method: 'POST',
        headers: {
          authorization: `Bearer ${message.apiKey}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({
          personalizations: [personalization],
          from: { email: message.from },
          template_id: message.templateId,
        }),
      },
      timeoutMs: this.#timeoutMs,
      secrets: [message.apiKey],
    })
    const id = answer.headers.get('x-message-id')
    if (!id) {
      throw new ProviderError('SendGrid', 'bad_response', {
        message: `SendGrid answered ${answer.status} without an X-Message-Id header; the email may have been sent`,
      })
    }
    return { providerMessageId: id }
  }
}
