import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import {
  expectProviderFailure,
  expectRefused,
  sendSms,
  smsBody,
  userWith,
} from '../helpers/messaging.js'
import { expectNoSecrets } from '../helpers/no-secrets.js'
import { type ProviderStandIn, startProviderStandIn, TEST_TWILIO } from '../helpers/providers.js'

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`

describe('POST /v1/users/{id}/message/sms', () => {
  let standIn: ProviderStandIn
  let t: TestApp
  let ada: { id: string; username: string }
  const messagesPath = `/2010-04-01/Accounts/${TEST_TWILIO.accountSid}/Messages.json`

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    t = await buildTestApp({ providers: standIn.config() })
    ada = await userWith(t, {
      phone: '+15558675309',
      formatted: '+1 (555) 867-5309',
      local: '555-867-5309',
      avatar: 'https://cdn.example.com/ada.png',
      private_avatar: 'http://10.0.0.7/ada.png',
      sender: 'Coffer',
      phones: ['+15558675309'],
    })
  })
  afterAll(async () => {
    await t?.close()
    await standIn?.close()
  })
  beforeEach(() => standIn.reset())

  describe('what reaches Twilio', () => {
    it('one Messages API call, urlencoded, Basic auth with the API key SID and secret', async () => {
      const res = await sendSms(
        t,
        ada.id,
        smsBody({
          message_body: 'Hello Ada & co: 100% ✓',
          media_urls: [
            { user_attribute: 'avatar' },
            { literal_value: 'https://images.example.org/a b.jpg?x=1&y=2' },
          ],
        }),
      )
      expect(res.statusCode, res.body).toBe(200)
      const [sent, ...others] = standIn.requests
      expect(others).toHaveLength(0)
      expect(sent).toMatchObject({
        provider: 'twilio',
        method: 'POST',
        path: messagesPath,
        query: '',
      })
      expect(sent?.headers.authorization).toBe(basic(TEST_TWILIO.keySid, TEST_TWILIO.keySecret))
      expect(sent?.headers['content-type']).toBe('application/x-www-form-urlencoded')
      expect(sent?.raw).toBe(
        new URLSearchParams([
          ['From', '+15555555555'],
          ['To', '+15558675309'],
          ['Body', 'Hello Ada & co: 100% ✓'],
          ['MediaUrl', 'https://cdn.example.com/ada.png'],
          ['MediaUrl', 'https://images.example.org/a%20b.jpg?x=1&y=2'],
        ]).toString(),
      )
      expect(sent?.form).toEqual({
        From: ['+15555555555'],
        To: ['+15558675309'],
        Body: ['Hello Ada & co: 100% ✓'],
        MediaUrl: [
          'https://cdn.example.com/ada.png',
          'https://images.example.org/a%20b.jpg?x=1&y=2',
        ],
      })
      // The id is the sid of Twilio's answer.
      const sid = JSON.parse(sent?.reply?.body ?? '{}').sid
      expect(sid).toMatch(/^SM[0-9a-f]{32}$/)
      expect(res.json()).toEqual({
        result: 'success',
        transaction_id: expect.any(String),
        provider_message_id: sid,
      })
      expectNoSecrets(res, TEST_TWILIO.keySecret)
    })

    it('the account SID with its auth token works the same way', async () => {
      const res = await sendSms(
        t,
        ada.id,
        smsBody({
          auth: {
            account_sid: TEST_TWILIO.accountSid,
            username: TEST_TWILIO.accountSid,
            password: TEST_TWILIO.authToken,
          },
        }),
      )
      expect(res.statusCode, res.body).toBe(200)
      expect(standIn.requests[0]?.headers.authorization).toBe(
        basic(TEST_TWILIO.accountSid, TEST_TWILIO.authToken),
      )
    })

    it('formatted numbers are sent in E.164; a media-only message has no Body', async () => {
      const res = await sendSms(
        t,
        ada.id,
        smsBody({
          to_number: { user_attribute: 'formatted' },
          from_number: { user_attribute: 'sender' },
          message_body: '',
          media_urls: [{ user_attribute: 'avatar' }],
        }),
      )
      expect(res.statusCode, res.body).toBe(200)
      expect(standIn.requests[0]?.form).toEqual({
        From: ['Coffer'],
        To: ['+15558675309'],
        MediaUrl: ['https://cdn.example.com/ada.png'],
      })
    })

    it('media_urls absent or null means none; the recipient may come from a dotted path', async () => {
      for (const media_urls of [undefined, null]) {
        const res = await sendSms(
          t,
          ada.id,
          smsBody({ media_urls, to_number: { user_attribute: 'phones.0' } }),
        )
        expect(res.statusCode, res.body).toBe(200)
      }
      for (const r of standIn.requests) {
        expect(r.form).toEqual({ From: ['+15555555555'], To: ['+15558675309'], Body: ['Hello'] })
      }
    })
  })

  describe('bad input: a 400 naming the field, nothing sent', () => {
    const auth = (over: Record<string, unknown>) => ({
      auth: {
        account_sid: TEST_TWILIO.accountSid,
        username: TEST_TWILIO.keySid,
        password: TEST_TWILIO.keySecret,
        ...over,
      },
    })
    it.each([
      ['provider missing', { provider: undefined }, 'provider is required'],
      ['provider of email', { provider: 'SENDGRID' }, 'provider must be TWILIO'],
      ['provider lowercase', { provider: 'twilio' }, 'provider must be TWILIO'],
      ['auth missing', { auth: undefined }, 'auth is required'],
      ['account sid missing', auth({ account_sid: undefined }), 'account_sid is required'],
      [
        'account sid that would change the path',
        auth({ account_sid: '../../Accounts/AC1' }),
        'auth.account_sid must hold only letters, digits, _ and -',
      ],
      ['username missing', auth({ username: undefined }), 'username is required'],
      [
        'password empty',
        auth({ password: '' }),
        'auth.password must NOT have fewer than 1 characters',
      ],
      ['username with a colon', auth({ username: 'SK1:x' }), 'auth.username must not contain ":"'],
      [
        'password with a control character',
        auth({ password: 'a\u0000b' }),
        'auth username and password must not contain control characters',
      ],
      ['from missing', { from_number: undefined }, 'from_number is required'],
      [
        'from not a number',
        { from_number: { literal_value: 'call me maybe' } },
        'from_number does not resolve to an E.164 phone number, a short code or an alphanumeric sender id',
      ],
      ['to missing', { to_number: undefined }, 'to_number is required'],
      [
        'to as a literal',
        { to_number: { literal_value: '+15550001111' } },
        'to_number must not be a literal_value: use user_attribute or system_field',
      ],
      [
        'to from a missing attribute',
        { to_number: { user_attribute: 'mobile' } },
        'to_number does not resolve to a value that can be sent to this user',
      ],
      [
        'to without a country code',
        { to_number: { user_attribute: 'local' } },
        'to_number does not resolve to a value that can be sent to this user',
      ],
      [
        'to from the username (no phone number)',
        { to_number: { system_field: 'username' } },
        'to_number does not resolve to a value that can be sent to this user',
      ],
      [
        'to from an array attribute',
        { to_number: { user_attribute: 'phones' } },
        'to_number does not resolve to a value that can be sent to this user',
      ],
      ['message body missing', { message_body: undefined }, 'message_body is required'],
      [
        'message body empty without media',
        { message_body: '' },
        'message_body must not be empty when no media_urls are given',
      ],
      [
        'message body too long',
        { message_body: 'x'.repeat(1601) },
        'message_body must NOT have more than 1600 characters',
      ],
      // The app's array coercion reads a lone value as a one-item list (as for every route).
      [
        'media_urls not an array',
        { media_urls: 'https://x.example.com/a.png' },
        'media_urls.0 must be object',
      ],
      [
        'too many media_urls',
        { media_urls: Array.from({ length: 11 }, () => ({ user_attribute: 'avatar' })) },
        'media_urls must NOT have more than 10 items',
      ],
      [
        'a media url that is no specifier',
        { media_urls: [{ url: 'x' }] },
        'media_urls.0 must be a value specifier: {literal_value}, {user_attribute} or {system_field}',
      ],
      [
        'a private media host',
        { media_urls: [{ user_attribute: 'avatar' }, { user_attribute: 'private_avatar' }] },
        'media_urls.1 does not resolve to a value that can be sent to this user',
      ],
      [
        'a loopback media host',
        { media_urls: [{ literal_value: 'http://127.0.0.1:8080/v1/users' }] },
        'media_urls.0 must point to a public host',
      ],
      [
        'a media url from a missing attribute',
        { media_urls: [{ user_attribute: 'picture' }] },
        'media_urls.0 does not resolve to a value that can be sent to this user',
      ],
      [
        'a media url that is not http(s)',
        { media_urls: [{ literal_value: 'file:///etc/passwd' }] },
        'media_urls.0 must resolve to an http or https URL',
      ],
    ])('%s', async (_label, overrides, message) => {
      expectRefused(await sendSms(t, ada.id, smsBody(overrides)), standIn, message)
    })

    it('refuses a form body with 415', async () => {
      const res = await t.api.post(`/v1/users/${ada.id}/message/sms`, {
        auth: t.admin.api_key,
        form: { provider: 'TWILIO', message_body: 'hi' },
      })
      expectRefused(res, standIn, 'Content-Type must be application/json', 415)
    })
  })

  describe('provider failures: the spec envelope with Twilio’s own error', () => {
    it('a wrong secret: Twilio’s 401 and error 20003, never the secret', async () => {
      const res = await sendSms(
        t,
        ada.id,
        smsBody({
          auth: {
            account_sid: TEST_TWILIO.accountSid,
            username: TEST_TWILIO.keySid,
            password: 'wrong-secret',
          },
        }),
      )
      const error = expectProviderFailure(res, 401, 'Error sending SMS', '401')
      expect(error.provider_error).toEqual({
        code: 20003,
        message: 'Authenticate',
        more_info: 'https://www.twilio.com/docs/errors/20003',
        status: 401,
      })
      expect(res.body).not.toContain('wrong-secret')
      expect(standIn.requests).toHaveLength(1)
    })

    it('the official SDK suite’s fake credentials fail the same way', async () => {
      const res = await sendSms(
        t,
        ada.id,
        smsBody({
          auth: {
            account_sid: 'twilio_account_id',
            username: 'twilio_key_id',
            password: 'twilio_key_secret',
          },
          message_body: 'Testing',
        }),
      )
      expectProviderFailure(res, 401, 'Error sending SMS', '401')
      expect(standIn.requests[0]?.path).toBe('/2010-04-01/Accounts/twilio_account_id/Messages.json')
    })

    it('Twilio’s refusal of a number comes back without the number', async () => {
      const refusal = {
        code: 21211,
        message: "The 'To' number +15558675309 is not a valid phone number.",
        more_info: 'https://www.twilio.com/docs/errors/21211',
        status: 400,
      }
      standIn.answerNext('twilio', { status: 400, body: refusal })
      const error = expectProviderFailure(
        await sendSms(t, ada.id, smsBody()),
        400,
        'Error sending SMS',
        '400',
      )
      expect(error.provider_error).toEqual({
        ...refusal,
        message: "The 'To' number [redacted] is not a valid phone number.",
      })
    })

    it('a 429 is passed on', async () => {
      standIn.answerNext('twilio', {
        status: 429,
        body: { code: 20429, message: 'Too Many Requests', status: 429 },
      })
      expectProviderFailure(await sendSms(t, ada.id, smsBody()), 429, 'Error sending SMS', '429')
    })

    it('a 201 without a sid is a 502: the SMS may or may not have gone', async () => {
      standIn.answerNext('twilio', { status: 201, body: 'not json' })
      const error = expectProviderFailure(
        await sendSms(t, ada.id, smsBody()),
        502,
        'Error sending SMS',
        'PROVIDER_BAD_RESPONSE',
      )
      expect(error.provider_error.message).toBe(
        'Twilio answered 201 without a message sid; the SMS may have been sent',
      )
    })

    it('a provider echoing the Basic pair or the secret gets both masked', async () => {
      const pair = Buffer.from(`${TEST_TWILIO.keySid}:${TEST_TWILIO.keySecret}`).toString('base64')
      standIn.answerNext('twilio', {
        status: 401,
        body: { code: 20003, message: `got ${pair} / ${TEST_TWILIO.keySecret}`, status: 401 },
      })
      const res = await sendSms(t, ada.id, smsBody())
      const error = expectProviderFailure(res, 401, 'Error sending SMS', '401')
      expect(error.provider_error.message).toBe('got [redacted] / [redacted]')
      expect(res.body).not.toContain(TEST_TWILIO.keySecret)
    })

    it('a dropped connection is a 502 and a slow provider a 504', async () => {
      standIn.answerNext('twilio', { hangUp: true })
      expectProviderFailure(
        await sendSms(t, ada.id, smsBody()),
        502,
        'Error sending SMS',
        'PROVIDER_UNREACHABLE',
      )
      const slow = await buildTestApp({ providers: standIn.config(300) })
      try {
        const user = await userWith(slow, { phone: '+15558675309' })
        standIn.answerNext('twilio', { status: 201, body: { sid: 'SMlate' }, delayMs: 20_000 })
        const error = expectProviderFailure(
          await sendSms(slow, user.id, smsBody()),
          504,
          'Error sending SMS',
          'PROVIDER_TIMEOUT',
        )
        expect(error.provider_error).toEqual({ message: 'Twilio did not answer within 300 ms' })
      } finally {
        await slow.close()
      }
    })
  })
})
