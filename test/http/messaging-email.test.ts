import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import {
  DYNAMIC_TEMPLATE_ID,
  emailBody,
  expectProviderFailure,
  expectRefused,
  sendEmail,
  TEMPLATE_ID,
  userWith,
} from '../helpers/messaging.js'
import { expectNoSecrets } from '../helpers/no-secrets.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
} from '../helpers/providers.js'

describe('POST /v1/users/{id}/message/email', () => {
  let standIn: ProviderStandIn
  let t: TestApp
  let ada: { id: string; username: string }

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    t = await buildTestApp({ providers: standIn.config() })
    ada = await userWith(t, {
      email: 'ada@example.com',
      name: 'Ada',
      age: 36,
      contact: { email: 'ada.work@example.com' },
      bad_email: 'not an address',
      profile: { city: 'London' },
    })
  })
  afterAll(async () => {
    await t?.close()
    await standIn?.close()
  })
  beforeEach(() => standIn.reset())

  describe('what reaches SendGrid', () => {
    it('one v3 mail send with the template, the resolved addresses and substitutions', async () => {
      const res = await sendEmail(
        t,
        ada.id,
        emailBody({
          substitutions: {
            '{{name}}': { user_attribute: 'name' },
            '-age-': { user_attribute: 'age' },
            ':nickname': { user_attribute: 'nickname' },
            '%user%': { system_field: 'username' },
            '{{ City }}': { user_attribute: 'profile.city' },
            名前: { literal_value: 'Ada L.' },
          },
        }),
      )
      expect(res.statusCode, res.body).toBe(200)
      const [sent, ...others] = standIn.requests
      expect(others).toHaveLength(0)
      expect(sent).toMatchObject({
        provider: 'sendgrid',
        method: 'POST',
        path: '/v3/mail/send',
        query: '',
      })
      expect(sent?.headers.authorization).toBe(`Bearer ${TEST_SENDGRID_KEY}`)
      expect(sent?.headers['content-type']).toBe('application/json')
      expect(sent?.json).toEqual({
        personalizations: [
          {
            to: [{ email: 'ada@example.com' }],
            substitutions: {
              '{{name}}': 'Ada',
              '-age-': '36',
              ':nickname': '',
              '%user%': ada.username,
              '{{ City }}': 'London',
              名前: 'Ada L.',
            },
          },
        ],
        from: { email: 'support@example.com' },
        template_id: TEMPLATE_ID,
      })
      // The id is SendGrid's X-Message-Id, passed on as is.
      const messageId = sent?.reply?.headers['x-message-id']
      expect(messageId).toEqual(expect.any(String))
      expect(res.json()).toEqual({
        result: 'success',
        transaction_id: expect.any(String),
        provider_message_id: messageId,
      })
      expectNoSecrets(res, TEST_SENDGRID_KEY)
    })

    it.each([
      ['absent', undefined],
      ['empty', {}],
      ['null', null],
    ])('no substitutions (%s) sends none', async (_label, substitutions) => {
      const res = await sendEmail(t, ada.id, emailBody({ substitutions }))
      expect(res.statusCode, res.body).toBe(200)
      expect(standIn.requests[0]?.json).toEqual({
        personalizations: [{ to: [{ email: 'ada@example.com' }] }],
        from: { email: 'support@example.com' },
        template_id: TEMPLATE_ID,
      })
    })

    it('resolves recipients from a nested attribute or the username, never from the caller', async () => {
      await sendEmail(
        t,
        ada.id,
        emailBody({ to_email_address: { user_attribute: 'contact.email' } }),
      )
      await sendEmail(t, ada.id, emailBody({ to_email_address: { system_field: 'username' } }))
      const other = await userWith(t, { email: 'grace@example.com', name: 'Grace' })
      await sendEmail(t, other.id, emailBody())
      expect(
        standIn.requests.map(
          (r) => (r.json as { personalizations: { to: unknown }[] }).personalizations[0]?.to,
        ),
      ).toEqual([
        [{ email: 'ada.work@example.com' }],
        [{ email: ada.username }],
        [{ email: 'grace@example.com' }],
      ])
      expect(standIn.requests[2]?.json).toMatchObject({
        personalizations: [{ substitutions: { '{{name}}': 'Grace' } }],
      })
    })

    it('takes the sender from an attribute too, trimmed', async () => {
      const u = await userWith(t, { email: ' u@example.com ', manager: 'boss@example.com' })
      const res = await sendEmail(
        t,
        u.id,
        emailBody({ from_email_address: { user_attribute: 'manager' }, substitutions: {} }),
      )
      expect(res.statusCode, res.body).toBe(200)
      expect(standIn.requests[0]?.json).toMatchObject({
        personalizations: [{ to: [{ email: 'u@example.com' }] }],
        from: { email: 'boss@example.com' },
      })
    })

    it('accepts an access token as well as an API key, and ignores unknown query parameters', async () => {
      const token = (
        await t.api.post(`/v1/users/${t.admin.userId}/access_token`, { auth: t.admin.api_key })
      ).json().user.access_token
      const res = await t.api.post(`/v1/users/${ada.id}/message/email`, {
        auth: token,
        json: emailBody(),
        query: { _tv_sdk: '1.3.1' },
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(standIn.requests).toHaveLength(1)
    })
  })

  describe('dynamic templates (d-…): dynamic_template_data, never legacy substitutions', () => {
    it('sends each tag as the Handlebars variable it names, dotted paths nested', async () => {
      const res = await sendEmail(
        t,
        ada.id,
        emailBody({
          template_id: DYNAMIC_TEMPLATE_ID,
          substitutions: {
            '{{name}}': { user_attribute: 'name' },
            '{{ user.city }}': { user_attribute: 'profile.city' },
            '{{{user.login}}}': { system_field: 'username' },
            age: { user_attribute: 'age' },
          },
        }),
      )
      expect(res.statusCode, res.body).toBe(200)
      const [sent, ...others] = standIn.requests
      expect(others).toHaveLength(0)
      expect(sent?.json).toEqual({
        personalizations: [
          {
            to: [{ email: 'ada@example.com' }],
            dynamic_template_data: {
              name: 'Ada',
              user: { city: 'London', login: ada.username },
              age: '36',
            },
          },
        ],
        from: { email: 'support@example.com' },
        template_id: DYNAMIC_TEMPLATE_ID,
      })
      // SendGrid accepted it (its stand-in refuses substitutions for a dynamic template).
      expect(sent?.reply?.status).toBe(202)
    })

    it('sends no template data when there are no substitutions', async () => {
      const res = await sendEmail(
        t,
        ada.id,
        emailBody({ template_id: DYNAMIC_TEMPLATE_ID, substitutions: {} }),
      )
      expect(res.statusCode, res.body).toBe(200)
      expect(standIn.requests[0]?.json).toEqual({
        personalizations: [{ to: [{ email: 'ada@example.com' }] }],
        from: { email: 'support@example.com' },
        template_id: DYNAMIC_TEMPLATE_ID,
      })
    })

    it('a legacy id keeps substitutions as written, the way SendGrid wants them', async () => {
      const res = await sendEmail(
        t,
        ada.id,
        emailBody({ substitutions: { name: { literal_value: 'A' } } }),
      )
      expect(res.statusCode, res.body).toBe(200)
      expect(standIn.requests[0]?.json).toMatchObject({
        personalizations: [{ substitutions: { name: 'A' } }],
        template_id: TEMPLATE_ID,
      })
      expect(standIn.requests[0]?.json).not.toHaveProperty(
        'personalizations.0.dynamic_template_data',
      )
    })

    it.each([
      [
        { '{{name}}': { user_attribute: 'name' }, name: { literal_value: 'x' } },
        'substitutions.name names the same template variable as {{name}} (dynamic templates get dynamic_template_data)',
      ],
      [
        { '{{user}}': { literal_value: 'x' }, '{{user.city}}': { literal_value: 'y' } },
        'substitutions.{{user.city}} names the same template variable as {{user}} (dynamic templates get dynamic_template_data)',
      ],
      [
        { '{{a..b}}': { literal_value: 'x' } },
        'substitutions.{{a..b}} is not a template variable name for a dynamic template (empty path segment)',
      ],
    ])(
      'refuses keys a dynamic template cannot tell apart (%j), sending nothing',
      async (substitutions, message) => {
        const res = await sendEmail(
          t,
          ada.id,
          emailBody({ template_id: DYNAMIC_TEMPLATE_ID, substitutions }),
        )
        expectRefused(res, standIn, message)
        // The same keys are fine for a legacy template: they are distinct tags there.
        expect((await sendEmail(t, ada.id, emailBody({ substitutions }))).statusCode).toBe(200)
      },
    )
  })

  describe('bad input: a 400 naming the field, nothing sent', () => {
    it.each([
      ['provider missing', { provider: undefined }, 'provider is required'],
      ['provider lowercase', { provider: 'sendgrid' }, 'provider must be SENDGRID'],
      ['provider of SMS', { provider: 'TWILIO' }, 'provider must be SENDGRID'],
      ['auth missing', { auth: undefined }, 'auth is required'],
      ['auth not an object', { auth: 'key' }, 'auth must be object'],
      ['api key missing', { auth: {} }, 'sendgrid_api_key is required'],
      [
        'api key empty',
        { auth: { sendgrid_api_key: '' } },
        'auth.sendgrid_api_key must NOT have fewer than 1 characters',
      ],
      [
        'api key with a space',
        { auth: { sendgrid_api_key: 'SG.a b' } },
        'auth.sendgrid_api_key must be printable ASCII without spaces',
      ],
      [
        'api key with a line break',
        { auth: { sendgrid_api_key: 'SG.a\r\nX-Evil: 1' } },
        'auth.sendgrid_api_key must be printable ASCII without spaces',
      ],
      ['template missing', { template_id: undefined }, 'template_id is required'],
      ['template empty', { template_id: '' }, 'template_id must NOT have fewer than 1 characters'],
      ['from missing', { from_email_address: undefined }, 'from_email_address is required'],
      [
        'from a plain string',
        { from_email_address: 'a@example.com' },
        'from_email_address must be object',
      ],
      [
        'from with two sources',
        { from_email_address: { literal_value: 'a@example.com', system_field: 'username' } },
        'from_email_address must hold exactly one of literal_value, user_attribute or system_field',
      ],
      [
        'from with an unknown source',
        { from_email_address: { value: 'a@example.com' } },
        'from_email_address must be a value specifier: {literal_value}, {user_attribute} or {system_field}',
      ],
      [
        'from not an address',
        { from_email_address: { literal_value: 'support' } },
        'from_email_address does not resolve to a valid email address',
      ],
      [
        'from empty',
        { from_email_address: { literal_value: '' } },
        'from_email_address resolved to an empty value',
      ],
      ['to missing', { to_email_address: undefined }, 'to_email_address is required'],
      [
        'to as a literal',
        { to_email_address: { literal_value: 'eve@example.com' } },
        'to_email_address must not be a literal_value: use user_attribute or system_field',
      ],
      [
        'to from a missing attribute',
        { to_email_address: { user_attribute: 'backup_email' } },
        'to_email_address does not resolve to a value that can be sent to this user',
      ],
      [
        'to from an attribute that is no address',
        { to_email_address: { user_attribute: 'bad_email' } },
        'to_email_address does not resolve to a value that can be sent to this user',
      ],
      [
        'to from an object attribute',
        { to_email_address: { user_attribute: 'contact' } },
        'to_email_address does not resolve to a value that can be sent to this user',
      ],
      [
        'to from a system field other than username',
        { to_email_address: { system_field: 'email' } },
        'to_email_address.system_field must be username',
      ],
      [
        'substitutions not an object',
        { substitutions: ['{{name}}'] },
        'substitutions must be object',
      ],
      [
        'a substitution that is no value specifier',
        { substitutions: { '{{name}}': 'Ada' } },
        'substitutions.{{name}} must be object',
      ],
      [
        'a substitution with an ASP-style tag',
        { substitutions: { '<%name%>': { user_attribute: 'name' } } },
        'substitutions.<%name%> must not use ASP-style <% %> delimiters; write the tag as in the template, e.g. {{name}}',
      ],
      [
        'a substitution opening an ASP-style tag',
        { substitutions: { '<%= name': { user_attribute: 'name' } } },
        'substitutions.<%= name must not use ASP-style <% %> delimiters; write the tag as in the template, e.g. {{name}}',
      ],
      [
        'an empty substitution key',
        { substitutions: { '': { user_attribute: 'name' } } },
        'substitutions keys must not be empty',
      ],
      [
        'a substitution from an object attribute',
        { substitutions: { '{{c}}': { user_attribute: 'profile' } } },
        'substitutions.{{c}} does not resolve to a value that can be sent to this user',
      ],
      [
        'too many substitutions',
        {
          substitutions: Object.fromEntries(
            Array.from({ length: 101 }, (_, i) => [`{{k${i}}}`, { literal_value: 'v' }]),
          ),
        },
        'substitutions must NOT have more than 100 properties',
      ],
    ])('%s', async (_label, overrides, message) => {
      expectRefused(await sendEmail(t, ada.id, emailBody(overrides)), standIn, message)
    })

    it('refuses a body that is not JSON (415) or not an object', async () => {
      const form = await t.api.post(`/v1/users/${ada.id}/message/email`, {
        auth: t.admin.api_key,
        form: { provider: 'SENDGRID', template_id: TEMPLATE_ID },
      })
      expectRefused(form, standIn, 'Content-Type must be application/json', 415)
      expect(form.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE')
      const multipart = await t.api.post(`/v1/users/${ada.id}/message/email`, {
        auth: t.admin.api_key,
        multipart: { provider: 'SENDGRID' },
      })
      expectRefused(multipart, standIn, 'Content-Type must be application/json', 415)
      const broken = await t.api.post(`/v1/users/${ada.id}/message/email`, {
        auth: t.admin.api_key,
        headers: { 'content-type': 'application/json' },
      })
      expectRefused(broken, standIn, 'body must be object')
      const invalid = await t.app.inject({
        method: 'POST',
        url: `/v1/users/${ada.id}/message/email`,
        headers: {
          authorization: `Basic ${Buffer.from(`${t.admin.api_key}:`).toString('base64')}`,
          'content-type': 'application/json',
        },
        payload: '{"provider": ',
      })
      expectRefused(invalid, standIn, 'Request body must be valid JSON')
    })

    it('refuses a user id that is not a UUID', async () => {
      expectRefused(
        await sendEmail(t, 'not-a-uuid', emailBody()),
        standIn,
        'user_id must be a valid UUID',
      )
    })
  })

  describe('provider failures: the spec envelope with SendGrid’s own error', () => {
    it('a refused key: SendGrid’s 401 and its error, never the key', async () => {
      const res = await sendEmail(
        t,
        ada.id,
        emailBody({ auth: { sendgrid_api_key: 'SG.revoked-key' } }),
      )
      const error = expectProviderFailure(res, 401, 'Error sending email', '401')
      expect(error.provider_error).toEqual({
        errors: [
          {
            message: 'The provided authorization grant is invalid, expired, or revoked',
            field: null,
            help: null,
          },
        ],
      })
      expect(res.body).not.toContain('SG.revoked-key')
      expect(standIn.requests).toHaveLength(1)
    })

    it('a template id SendGrid does not take: its 400 with the field it names', async () => {
      const res = await sendEmail(t, ada.id, emailBody({ template_id: 'welcome' }))
      const error = expectProviderFailure(res, 400, 'Error sending email', '400')
      expect(error.provider_error).toEqual({
        errors: [
          {
            message: "The template_id must be a valid GUID, you provided 'welcome'.",
            field: 'template_id',
            help: null,
          },
        ],
      })
    })

    it('a 5xx with a text body: the status and the text', async () => {
      standIn.answerNext('sendgrid', { status: 503, body: 'upstream overloaded' })
      const error = expectProviderFailure(
        await sendEmail(t, ada.id, emailBody()),
        503,
        'Error sending email',
        '503',
      )
      expect(error.provider_error).toEqual({ body: 'upstream overloaded' })
    })

    it('a huge or garbage body is cut to 1000 characters', async () => {
      standIn.answerNext('sendgrid', { status: 500, body: `<html>${'x'.repeat(1_000_000)}` })
      const error = expectProviderFailure(
        await sendEmail(t, ada.id, emailBody()),
        500,
        'Error sending email',
        '500',
      )
      const text = error.provider_error.body as string
      expect(text.startsWith('<html>xxx')).toBe(true)
      expect(text).toHaveLength(1001)
    })

    it('a provider echoing the key gets it masked', async () => {
      standIn.answerNext('sendgrid', {
        status: 400,
        body: { errors: [{ message: `bad key ${TEST_SENDGRID_KEY}`, field: null, help: null }] },
      })
      const res = await sendEmail(t, ada.id, emailBody())
      const error = expectProviderFailure(res, 400, 'Error sending email', '400')
      expect(error.provider_error).toEqual({
        errors: [{ message: 'bad key [redacted]', field: null, help: null }],
      })
      expect(res.body).not.toContain(TEST_SENDGRID_KEY)
    })

    it('a redirect is not followed', async () => {
      standIn.answerNext('sendgrid', {
        status: 307,
        headers: { location: `${standIn.url}/sendgrid/v3/mail/send?again=1` },
      })
      expectProviderFailure(
        await sendEmail(t, ada.id, emailBody()),
        502,
        'Error sending email',
        '307',
      )
      expect(standIn.requests).toHaveLength(1)
    })

    it('a 2xx without X-Message-Id is a 502: the email may or may not have gone', async () => {
      standIn.answerNext('sendgrid', { status: 202 })
      const error = expectProviderFailure(
        await sendEmail(t, ada.id, emailBody()),
        502,
        'Error sending email',
        'PROVIDER_BAD_RESPONSE',
      )
      expect(error.provider_error.message).toBe(
        'SendGrid answered 202 without an X-Message-Id header; the email may have been sent',
      )
    })

    it('a dropped connection is a 502', async () => {
      standIn.answerNext('sendgrid', { hangUp: true })
      const error = expectProviderFailure(
        await sendEmail(t, ada.id, emailBody()),
        502,
        'Error sending email',
        'PROVIDER_UNREACHABLE',
      )
      expect(error.provider_error).toEqual({ message: 'SendGrid could not be reached' })
    })

    it('a provider that does not answer in time is a 504', async () => {
      const slow = await buildTestApp({ providers: standIn.config(300) })
      try {
        const user = await userWith(slow, { email: 'slow@example.com' })
        standIn.answerNext('sendgrid', { status: 202, delayMs: 20_000 })
        const error = expectProviderFailure(
          await sendEmail(slow, user.id, emailBody({ substitutions: {} })),
          504,
          'Error sending email',
          'PROVIDER_TIMEOUT',
        )
        expect(error.provider_error).toEqual({ message: 'SendGrid did not answer within 300 ms' })
      } finally {
        await slow.close()
      }
    })

    it('a provider that cannot be reached at all is a 502', async () => {
      const nowhere = await buildTestApp()
      try {
        const user = await userWith(nowhere, { email: 'x@example.com' })
        expectProviderFailure(
          await sendEmail(nowhere, user.id, emailBody({ substitutions: {} })),
          502,
          'Error sending email',
          'PROVIDER_UNREACHABLE',
        )
      } finally {
        await nowhere.close()
      }
    })
  })
})
