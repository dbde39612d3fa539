import type TrueVaultClient from 'truevault'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { TEMPLATE_ID } from '../helpers/messaging.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
  TEST_TWILIO,
} from '../helpers/providers.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectApiError, sdkError, sdkFor, TRANSPORTS, UUID, uniqueName } from './support.js'

/**
 * The official SDK suite's "sendgrid → works" and "twilio → works", against a listening server
 * whose providers are the local stand-in: what the SDK sends is accepted, what Coffer sends the
 * provider is exactly right, and what comes back is what the SDK reads (`provider_message_id`,
 * or a standard error).
 */
describe.each(TRANSPORTS)('official SDK (%s): messaging', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  let standIn: ProviderStandIn
  let server: TestServer
  let admin: TrueVaultClient

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    server = await startTestServer({ providers: standIn.config() })
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
  })
  afterAll(async () => {
    await server?.close()
    await standIn?.close()
  })
  beforeEach(() => standIn.reset())

  describe('sendEmailSendgrid', () => {
    it('works as in the SDK suite: a literal sender, the user’s email attribute, {}', async () => {
      const user = await admin.createUser(uniqueName(), uniqueName(), { email: 'test@example.com' })
      const id = await admin.sendEmailSendgrid(
        TEST_SENDGRID_KEY,
        user.id,
        TEMPLATE_ID,
        { literal_value: 'support@example.com' },
        { user_attribute: 'email' },
        {},
      )
      expect(typeof id).toBe('string')
      const [sent, ...others] = standIn.requests
      expect(others).toHaveLength(0)
      expect(id).toBe(sent?.reply?.headers['x-message-id'])
      expect(sent).toMatchObject({ method: 'POST', path: '/v3/mail/send', query: '' })
      expect(sent?.headers.authorization).toBe(`Bearer ${TEST_SENDGRID_KEY}`)
      expect(sent?.json).toEqual({
        personalizations: [{ to: [{ email: 'test@example.com' }] }],
        from: { email: 'support@example.com' },
        template_id: TEMPLATE_ID,
      })
    })

    it('sends substitutions keyed as written, and works without the argument', async () => {
      const user = await admin.createUser(uniqueName(), uniqueName(), {
        email: 'ada@example.com',
        first_name: 'Ada',
      })
      await admin.sendEmailSendgrid(
        TEST_SENDGRID_KEY,
        user.id,
        TEMPLATE_ID,
        { literal_value: 'support@example.com' },
        { user_attribute: 'email' },
        {
          '{{first_name}}': { user_attribute: 'first_name' },
          '{{username}}': { system_field: 'username' },
          '{{missing}}': { user_attribute: 'nope' },
        },
      )
      await admin.sendEmailSendgrid(
        TEST_SENDGRID_KEY,
        user.id,
        TEMPLATE_ID,
        { literal_value: 'support@example.com' },
        { user_attribute: 'email' },
      )
      expect(standIn.requests.map((r) => r.json)).toEqual([
        {
          personalizations: [
            {
              to: [{ email: 'ada@example.com' }],
              substitutions: {
                '{{first_name}}': 'Ada',
                '{{username}}': user.username,
                '{{missing}}': '',
              },
            },
          ],
          from: { email: 'support@example.com' },
          template_id: TEMPLATE_ID,
        },
        {
          personalizations: [{ to: [{ email: 'ada@example.com' }] }],
          from: { email: 'support@example.com' },
          template_id: TEMPLATE_ID,
        },
      ])
    })

    it('a key SendGrid refuses: a standard error the SDK throws, with SendGrid’s own', async () => {
      const user = await admin.createUser(uniqueName(), uniqueName(), { email: 'a@example.com' })
      const e = await sdkError(
        admin.sendEmailSendgrid(
          'SG.not-a-real-key',
          user.id,
          TEMPLATE_ID,
          { literal_value: 'support@example.com' },
          { user_attribute: 'email' },
          {},
        ),
      )
      expectApiError(e)
      expect(e.error).toMatchObject({
        type: 'request_failed',
        message: 'Error sending email',
        code: '401',
        provider_error: { errors: [expect.objectContaining({ field: null })] },
      })
      expect(JSON.stringify(e.error)).not.toContain('SG.not-a-real-key')
    })

    it('a literal recipient is refused before anything is sent', async () => {
      const user = await admin.createUser(uniqueName(), uniqueName(), { email: 'a@example.com' })
      const e = await sdkError(
        admin.sendEmailSendgrid(
          TEST_SENDGRID_KEY,
          user.id,
          TEMPLATE_ID,
          { literal_value: 'support@example.com' },
          { literal_value: 'eve@example.com' },
          {},
        ),
      )
      expectApiError(e)
      expect(e.message).toBe(
        'to_email_address must not be a literal_value: use user_attribute or system_field',
      )
      expect(standIn.requests).toHaveLength(0)
    })
  })

  describe('sendSMSTwilio', () => {
    it('works with an API key SID and secret, with media', async () => {
      const user = await admin.createUser(uniqueName(), uniqueName(), { phone: '+15558675309' })
      const id = await admin.sendSMSTwilio(
        TEST_TWILIO.accountSid,
        TEST_TWILIO.keySid,
        TEST_TWILIO.keySecret,
        user.id,
        { literal_value: '+15555555555' },
        { user_attribute: 'phone' },
        'Testing',
        [{ literal_value: 'https://cdn.example.com/a.png' }],
      )
      const [sent, ...others] = standIn.requests
      expect(others).toHaveLength(0)
      expect(id).toBe(JSON.parse(sent?.reply?.body ?? '{}').sid)
      expect(id).toMatch(/^SM/)
      expect(sent?.path).toBe(`/2010-04-01/Accounts/${TEST_TWILIO.accountSid}/Messages.json`)
      expect(sent?.headers.authorization).toBe(
        `Basic ${Buffer.from(`${TEST_TWILIO.keySid}:${TEST_TWILIO.keySecret}`).toString('base64')}`,
      )
      expect(sent?.form).toEqual({
        From: ['+15555555555'],
        To: ['+15558675309'],
        Body: ['Testing'],
        MediaUrl: ['https://cdn.example.com/a.png'],
      })
    })

    it('works without media (the SDK sends [])', async () => {
      const user = await admin.createUser(uniqueName(), uniqueName(), { phone: '+15558675309' })
      const id = await admin.sendSMSTwilio(
        TEST_TWILIO.accountSid,
        TEST_TWILIO.accountSid,
        TEST_TWILIO.authToken,
        user.id,
        { literal_value: '+15555555555' },
        { user_attribute: 'phone' },
        'Testing',
      )
      expect(typeof id).toBe('string')
      expect(standIn.requests[0]?.form).toEqual({
        From: ['+15555555555'],
        To: ['+15558675309'],
        Body: ['Testing'],
      })
    })

    it('the SDK suite’s fake credentials: Twilio refuses them, the SDK throws a standard error', async () => {
      const user = await admin.createUser(uniqueName(), uniqueName(), { phone: '+15558675309' })
      const e = await sdkError(
        admin.sendSMSTwilio(
          'twilio_account_id',
          'twilio_key_id',
          'twilio_key_secret',
          user.id,
          { literal_value: '+15555555555' },
          { user_attribute: 'phone' },
          'Testing',
        ),
      )
      expectApiError(e)
      expect(e.error).toMatchObject({
        type: 'request_failed',
        message: 'Error sending SMS',
        code: '401',
        provider_error: { code: 20003, message: 'Authenticate', status: 401 },
      })
      expect(e.transaction_id).toMatch(UUID)
      expect(standIn.requests).toHaveLength(1)
    })
  })
})
