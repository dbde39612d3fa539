import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { AppError } from '../../src/lib/errors.js'
import {
  EMAIL_FAILED,
  ProviderError,
  providerFailure,
  SendGridClient,
  TwilioClient,
} from '../../src/modules/messaging/index.js'
import { TEMPLATE_ID } from '../helpers/messaging.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
  TEST_TWILIO,
} from '../helpers/providers.js'

/** The clients other features reuse (password reset flows), on their own against the stand-in. */
describe('messaging clients', () => {
  let standIn: ProviderStandIn
  let sendgrid: SendGridClient
  let twilio: TwilioClient

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    const config = standIn.config()
    sendgrid = new SendGridClient({ baseUrl: `${config.sendgridBaseUrl}/`, timeoutMs: 5000 })
    twilio = new TwilioClient({ baseUrl: config.twilioBaseUrl, timeoutMs: 5000 })
  })
  afterAll(() => standIn?.close())
  beforeEach(() => standIn.reset())

  const message = {
    apiKey: TEST_SENDGRID_KEY,
    templateId: TEMPLATE_ID,
    from: 'support@example.com',
    to: 'ada@example.com',
    substitutions: { '{{link}}': 'https://app.example.com/reset?t=1' },
  }

  it('SendGridClient.sendTemplate returns SendGrid’s message id', async () => {
    const { providerMessageId } = await sendgrid.sendTemplate(message)
    expect(providerMessageId).toBe(standIn.requests[0]?.reply?.headers['x-message-id'])
    expect(standIn.requests[0]?.path).toBe('/v3/mail/send')
    expect(standIn.requests[0]?.json).toEqual({
      personalizations: [
        {
          to: [{ email: 'ada@example.com' }],
          substitutions: { '{{link}}': 'https://app.example.com/reset?t=1' },
        },
      ],
      from: { email: 'support@example.com' },
      template_id: TEMPLATE_ID,
    })
  })

  it('a refusal is a ProviderError carrying the status and SendGrid’s error', async () => {
    const error = await sendgrid.sendTemplate({ ...message, apiKey: 'SG.wrong' }).catch((e) => e)
    expect(error).toBeInstanceOf(ProviderError)
    expect(error).toMatchObject({ provider: 'SendGrid', failure: 'rejected', status: 401 })
    expect(error.detail.errors[0].message).toBe(
      'The provided authorization grant is invalid, expired, or revoked',
    )
    // …which providerFailure turns into the spec's envelope.
    const app = providerFailure(error, EMAIL_FAILED) as AppError
    expect(app).toBeInstanceOf(AppError)
    expect(app).toMatchObject({
      statusCode: 401,
      type: 'request_failed',
      code: '401',
      message: 'Error sending email',
      providerError: error.detail,
    })
    // Not an own enumerable field: a logged error never carries the provider's text.
    expect(Object.keys(app)).not.toContain('providerError')
    const other = new Error('not a provider')
    expect(providerFailure(other, EMAIL_FAILED)).toBe(other)
  })

  it('TwilioClient.sendMessage returns the sid', async () => {
    const { providerMessageId } = await twilio.sendMessage({
      accountSid: TEST_TWILIO.accountSid,
      username: TEST_TWILIO.keySid,
      password: TEST_TWILIO.keySecret,
      from: '+15555555555',
      to: '+15558675309',
      body: 'Your code is 123456',
      mediaUrls: [],
    })
    expect(providerMessageId).toBe(JSON.parse(standIn.requests[0]?.reply?.body ?? '{}').sid)
    expect(standIn.requests[0]?.form).toEqual({
      From: ['+15555555555'],
      To: ['+15558675309'],
      Body: ['Your code is 123456'],
    })
  })
})
