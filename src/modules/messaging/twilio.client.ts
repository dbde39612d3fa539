import { callProvider, ProviderError } from './provider-http.js'

export interface TwilioOptions {
  /** `https://api.twilio.com` in production; configuration, never caller-supplied. */
  baseUrl: string
  timeoutMs: number
}

export interface TwilioMessage {
  accountSid: string
  /** An API key SID with its secret, or the account SID with its auth token. Used once. */
  username: string
  password: string
  from: string
  to: string
  /** Omitted from the request when empty (a media-only message). */
  body: string
  mediaUrls: readonly string[]
}

/**
 * Twilio's Messages API: `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, urlencoded
 * `From`, `To`, `Body` and one `MediaUrl` per image, HTTP Basic auth. Twilio answers 201 with
 * the message as JSON; its `sid` is the message id.
 */
export class TwilioClient {
  readonly #baseUrl: string
  readonly #timeoutMs: number

  constructor(options: TwilioOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '')
    this.#timeoutMs = options.timeoutMs
  }

  /** Sends the message; throws a ProviderError when Twilio refuses it or cannot be reached. */
  async sendMessage(message: TwilioMessage): Promise<{ providerMessageId: string }> {
    const form = new URLSearchParams()
    form.append('From', message.from)
    form.append('To', message.to)
    if (message.body !== '') form.append('Body', message.body)
    for (const url of message.mediaUrls) form.append('MediaUrl', url)
    const basic = Buffer.from(`${message.username}:${message.password}`).toString('base64')
    const answer = await callProvider({
      provider: 'Twilio',
      url: `${this.#baseUrl}/2010-04-01/Accounts/${encodeURIComponent(message.accountSid)}/Messages.json`,
      init: {
        method: 'POST',
        headers: {
          authorization: `Basic ${basic}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form.toString(),
      },
      timeoutMs: this.#timeoutMs,
      secrets: [message.password, basic],
    })
    let sid: unknown
    try {
      sid = (JSON.parse(answer.text) as { sid?: unknown }).sid
    } catch {
      sid = undefined
    }
    if (typeof sid !== 'string' || sid === '') {
      throw new ProviderError('Twilio', 'bad_response', {
        message: `Twilio answered ${answer.status} without a message sid; the SMS may have been sent`,
      })
    }
    return { providerMessageId: sid }
  }
}
