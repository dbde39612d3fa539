import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { MESSAGES_PER_USER } from '../../src/modules/messaging/message-rate-limit.js'
import { bumpWindow } from '../../src/store/window-counter.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import {
  emailBody,
  expectProviderFailure,
  sendEmail,
  sendSms,
  smsBody,
  userWith,
} from '../helpers/messaging.js'
import { sendgridQuotingRecipient, twilioQuotingRecipient } from '../helpers/provider-imitations.js'
import { type ProviderStandIn, startProviderStandIn } from '../helpers/providers.js'

/**
 * Issue 10, finding 6: a caller allowed only C on `User::X::Message` (it cannot read X) must not
 * learn X's attributes by probing value specifiers or reading a provider's refusal.
 */
const EMAIL = 'secret.person@example.com'
const PHONE = '+15558675309'
const ATTRIBUTES = {
  email: EMAIL,
  phone: PHONE,
  profile: { city: 'London', code: 7 },
  list: ['a@example.com'],
  word: 'hello',
  count: 5,
  flag: true,
  nothing: null,
  blank: '   ',
  empty: '',
}
/** Every kind of specifier that cannot become a recipient, for a recipient field. */
const UNRESOLVABLE = (usable: string, unusable: string): [string, object][] => [
  ['an unset attribute', { user_attribute: 'missing' }],
  ['an unset nested path', { user_attribute: 'profile.zip' }],
  ['an object', { user_attribute: 'profile' }],
  ['an array', { user_attribute: 'list' }],
  ['a word', { user_attribute: 'word' }],
  ['a number', { user_attribute: 'count' }],
  ['a nested number', { user_attribute: 'profile.code' }],
  ['a boolean', { user_attribute: 'flag' }],
  ['null', { user_attribute: 'nothing' }],
  ['blanks', { user_attribute: 'blank' }],
  ['an empty text', { user_attribute: 'empty' }],
  [`the other kind of address (${unusable})`, { user_attribute: unusable }],
  ['a username that is no address', { system_field: 'username' }],
  // Sanity: the probe target itself is usable.
  ['(control) the usable attribute', { user_attribute: usable }],
]

describe('messaging: a message-only caller learns nothing about the user', () => {
  let standIn: ProviderStandIn
  let t: TestApp
  let target: { id: string }
  let messageOnly: string

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    t = await buildTestApp({ providers: standIn.config() })
    target = await userWith(t, ATTRIBUTES, 'probe-target')
    messageOnly = (
      await createUser(t, {
        policy: [{ Resources: [`User::${target.id}::Message`], Activities: 'C' }],
      })
    ).apiKey
  })
  afterAll(async () => {
    await t?.close()
    await standIn?.close()
  })
  beforeEach(() => standIn.reset())

  it('cannot read the user', async () => {
    const res = await t.api.get(`/v1/users/${target.id}`, { auth: messageOnly })
    expect([401, 404]).toContain(res.statusCode)
  })

  const literalSubs = { substitutions: { '{{n}}': { literal_value: 'x' } } }
  for (const [channel, send, body, field, usable, unusable] of [
    ['email', sendEmail, emailBody, 'to_email_address', 'email', 'phone'],
    ['SMS', sendSms, smsBody, 'to_number', 'phone', 'email'],
  ] as const) {
    it(`${channel}: every unresolvable ${field} gets one and the same answer`, async () => {
      const answers = new Map<string, unknown>()
      for (const [label, spec] of UNRESOLVABLE(usable, unusable)) {
        const res = await send(t, target.id, body({ ...literalSubs, [field]: spec }), messageOnly)
        if (label.startsWith('(control)')) {
          expect(res.statusCode, res.body).toBe(200)
          continue
        }
        const error = errorOf(res)
        answers.set(
          label,
          JSON.stringify({ status: res.statusCode, ...error, transaction_id: undefined }),
        )
      }
      const distinct = new Set(answers.values())
      expect(distinct.size, JSON.stringify(Object.fromEntries(answers), null, 1)).toBe(1)
      expect(JSON.parse([...distinct][0] as string)).toEqual({
        status: 400,
        type: 'invalid_request_error',
        code: 'UNRESOLVABLE_VALUE',
        message: `${field} does not resolve to a value that can be sent to this user`,
      })
      // Only the control message reached the provider.
      expect(standIn.requests).toHaveLength(1)
    })
  }
})

describe('messaging: an unresolvable value is answered only after the rate limit counted it', () => {
  let standIn: ProviderStandIn
  let t: TestApp
  const clock = new ManualClock('2030-01-01T00:00:00.000Z')

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    t = await buildTestApp({ providers: standIn.config(), clock })
  })
  afterAll(async () => {
    await t?.close()
    await standIn?.close()
  })

  const fill = async (userId: string, count: number) => {
    for (let i = 0; i < count; i++)
      await bumpWindow(
        t.deps.store.db,
        { scope: t.admin.account_id, key: `message\n${t.admin.account_id}\n${userId}` },
        clock.now(),
        MESSAGES_PER_USER.windowMs,
      )
  }

  it('probes count against the limit, and beyond it get the 429, not the 400', async () => {
    const target = await userWith(t, ATTRIBUTES)
    await fill(target.id, MESSAGES_PER_USER.max - 1)
    const probe = emailBody({ substitutions: {}, to_email_address: { user_attribute: 'word' } })
    // The last message of the hour is spent on the probe…
    const last = await sendEmail(t, target.id, probe)
    expect(last.statusCode, last.body).toBe(400)
    expect(errorOf(last).code).toBe('UNRESOLVABLE_VALUE')
    // …so a good message is now refused, and so is every further probe, whatever it names.
    for (const body of [
      emailBody({ substitutions: {} }),
      probe,
      emailBody({ substitutions: {}, to_email_address: { user_attribute: 'profile' } }),
    ]) {
      const res = await sendEmail(t, target.id, body)
      expect(res.statusCode, res.body).toBe(429)
      expect(errorOf(res).code).toBe('TOO_MANY_MESSAGES')
    }
    for (const to of [{ user_attribute: 'email' }, { user_attribute: 'phone' }]) {
      const res = await sendSms(t, target.id, smsBody({ to_number: to }))
      expect(res.statusCode, res.body).toBe(429)
    }
    expect(standIn.requests).toHaveLength(0)
  })

  it('a bad literal is still refused precisely and before anything is counted', async () => {
    const target = await userWith(t, ATTRIBUTES)
    await fill(target.id, MESSAGES_PER_USER.max)
    const res = await sendEmail(
      t,
      target.id,
      emailBody({ substitutions: {}, from_email_address: { literal_value: 'support' } }),
    )
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).message).toBe(
      'from_email_address does not resolve to a valid email address',
    )
  })
})

describe('messaging: a provider quoting the recipient back', () => {
  let standIn: ProviderStandIn
  let t: TestApp
  let target: { id: string }
  let messageOnly: string

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    t = await buildTestApp({ providers: standIn.config() })
    target = await userWith(t, { ...ATTRIBUTES, name: 'Ada Lovelace' })
    messageOnly = (
      await createUser(t, {
        policy: [{ Resources: [`User::${target.id}::Message`], Activities: 'C' }],
      })
    ).apiKey
  })
  afterAll(async () => {
    await t?.close()
    await standIn?.close()
  })
  beforeEach(() => standIn.reset())

  it('SendGrid: the address is stripped from provider_error, the rest is kept', async () => {
    standIn.answerNext('sendgrid', { replyFrom: sendgridQuotingRecipient })
    const res = await sendEmail(
      t,
      target.id,
      emailBody({ substitutions: { '{{n}}': { literal_value: 'x' } } }),
      messageOnly,
    )
    // The stand-in did quote it…
    expect(standIn.requests[0]?.reply?.body).toContain(EMAIL)
    const error = expectProviderFailure(res, 400, 'Error sending email', '400')
    // …and none of its spellings comes back.
    for (const spelling of [EMAIL, encodeURIComponent(EMAIL), 'secret.person'])
      expect(res.body.toLowerCase()).not.toContain(spelling.toLowerCase())
    expect(error.provider_error).toEqual({
      errors: [
        {
          message: 'The to address [redacted] is on a suppression list.',
          field: 'personalizations.0.to.0.email',
          help: 'https://app.sendgrid.com/suppressions?email=[redacted]',
        },
        { message: 'Bounced: [redacted]', field: null, help: null },
      ],
    })
  })

  it('SendGrid: other values read from the user are stripped too', async () => {
    standIn.answerNext('sendgrid', {
      status: 400,
      body: { errors: [{ message: 'Substitution "Ada Lovelace" too long', field: null }] },
    })
    const res = await sendEmail(
      t,
      target.id,
      emailBody({ substitutions: { '{{n}}': { user_attribute: 'name' } } }),
    )
    const error = expectProviderFailure(res, 400, 'Error sending email', '400')
    expect(error.provider_error).toEqual({
      errors: [{ message: 'Substitution "[redacted]" too long', field: null }],
    })
  })

  it('Twilio: the number, however formatted, is stripped; code and links are kept', async () => {
    standIn.answerNext('twilio', { replyFrom: twilioQuotingRecipient })
    const res = await sendSms(t, target.id, smsBody(), messageOnly)
    expect(standIn.requests[0]?.reply?.body).toContain(PHONE)
    const error = expectProviderFailure(res, 400, 'Error sending SMS', '400')
    expect(res.body).not.toContain('5558675309')
    expect(res.body).not.toContain('867-5309')
    expect(error.provider_error).toEqual({
      code: 21211,
      message: "The 'To' number [redacted] is not a valid phone number (shown as [redacted]).",
      more_info: 'https://www.twilio.com/docs/errors/21211',
      status: 400,
    })
  })
})
