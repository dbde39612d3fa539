import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { MESSAGES_PER_USER } from '../../src/modules/messaging/message-rate-limit.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { bumpWindow } from '../../src/store/window-counter.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import { emailBody, sendEmail, sendSms, smsBody, userWith } from '../helpers/messaging.js'
import { type ProviderStandIn, startProviderStandIn } from '../helpers/providers.js'

/**
 * Who may message whom: C on `User::<id>::Message` (or `User::.*::Message`), through an API key
 * or an access token; refusals come before any provider call.
 */
describe('messaging: access', () => {
  let standIn: ProviderStandIn
  let t: TestApp
  let target: { id: string; username: string }

  const attributes = { email: 'target@example.com', phone: '+15558675309', name: 'T' }
  /** Only the recipient comes from the user: C on the message resource is enough. */
  const literalSubstitutions = { substitutions: { '{{name}}': { literal_value: 'T' } } }
  const both = async (userId: string, auth: string) => [
    await sendEmail(t, userId, emailBody(literalSubstitutions), auth),
    await sendSms(t, userId, smsBody(), auth),
  ]
  const caller = async (policy: PolicyStatement[]) => (await createUser(t, { policy })).apiKey

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    t = await buildTestApp({ providers: standIn.config() })
    target = await userWith(t, attributes)
  })
  afterAll(async () => {
    await t?.close()
    await standIn?.close()
  })
  beforeEach(() => standIn.reset())

  it.each([
    [
      'the exact resource',
      (id: string) => [{ Resources: [`User::${id}::Message`], Activities: 'C' }],
    ],
    ['any user', () => [{ Resources: ['User::.*::Message'], Activities: 'C' }]],
  ])('C on %s allows both endpoints', async (_label, policy) => {
    const key = await caller(policy(target.id))
    for (const res of await both(target.id, key)) expect(res.statusCode, res.body).toBe(200)
    expect(standIn.requests.map((r) => r.provider)).toEqual(['sendgrid', 'twilio'])
  })

  it('values from the user other than the recipient also need R on the user', async () => {
    const messageOnly = await caller([
      { Resources: [`User::${target.id}::Message`], Activities: 'C' },
    ])
    const withRead = await caller([
      { Resources: [`User::${target.id}::Message`], Activities: 'C' },
      { Resources: [`User::${target.id}`], Activities: 'R' },
    ])
    const bodies = [
      emailBody(),
      emailBody({ ...literalSubstitutions, from_email_address: { system_field: 'username' } }),
    ]
    for (const body of bodies) {
      const denied = await sendEmail(t, target.id, body, messageOnly)
      expect(denied.statusCode).toBe(401)
      expect((await sendEmail(t, target.id, body, withRead)).statusCode).toBe(200)
    }
    const sms = smsBody({ media_urls: [{ user_attribute: 'avatar' }] })
    expect((await sendSms(t, target.id, sms, messageOnly)).statusCode).toBe(401)
    expect(standIn.requests.map((r) => r.provider)).toEqual(['sendgrid', 'sendgrid'])
  })

  it('the refusal names the missing R and the parameters needing it, never whether a value exists', async () => {
    const messageOnly = await caller([{ Resources: ['User::.*::Message'], Activities: 'C' }])
    const answer = async (userId: string, attribute: string) => {
      const res = await sendEmail(
        t,
        userId,
        emailBody({ substitutions: { '{{name}}': { user_attribute: attribute } } }),
        messageOnly,
      )
      expect(res.statusCode, res.body).toBe(401)
      return errorOf(res)
    }
    const set = await answer(target.id, 'name')
    expect(set).toMatchObject({ type: 'authorization_error', code: 'PERMISSION_DENIED' })
    expect(set.message).toBe(
      "substitutions: values taken from the user's data (user_attribute or system_field) need " +
        `R on User::${target.id} besides C on User::${target.id}::Message, since they reach ` +
        "the caller's own template and provider account; only the recipient may come from the " +
        'user with C alone',
    )
    // An attribute the user lacks gets the very same answer, and so does a user that does not
    // exist (apart from the id the caller itself sent).
    expect(await answer(target.id, 'no-such-attribute')).toEqual(set)
    const nobody = randomUUID()
    expect(await answer(nobody, 'name')).toEqual({
      ...set,
      message: set.message.replaceAll(target.id, nobody),
    })
    // Every parameter that reads the user is named.
    const sms = await sendSms(
      t,
      target.id,
      smsBody({
        from_number: { user_attribute: 'phone' },
        media_urls: [{ literal_value: 'https://example.com/a.png' }, { user_attribute: 'avatar' }],
      }),
      messageOnly,
    )
    expect(errorOf(sms).message).toMatch(/^from_number, media_urls: values taken from the user/)
    // Without C on the message resource the refusal stays the general one.
    const readOnly = await caller([{ Resources: ['User::.*'], Activities: 'R' }])
    const none = await sendEmail(t, target.id, emailBody(), readOnly)
    expect(errorOf(none).message).toBe('The credential does not have permission for this request')
    expect(standIn.requests).toHaveLength(0)
  })

  it('refuses scoped access tokens (spec: API key or access token)', async () => {
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'messenger',
        policy: [{ Resources: ['User::.*::Message'], Activities: 'C' }],
        not_valid_after: new Date(Date.now() + 60_000).toISOString(),
      },
    })
    const basic = sat.json().scoped_access_token.http_auth
    const res = await t.api.post(`/v1/users/${target.id}/message/email`, {
      basic,
      json: emailBody(literalSubstitutions),
    })
    expect(res.statusCode).toBe(401)
    expect(errorOf(res).code).toBe('CREDENTIAL_NOT_ALLOWED')
  })

  it('an access token of an allowed user works too', async () => {
    const user = await createUser(t, {
      policy: [{ Resources: ['User::.*::Message'], Activities: 'C' }],
    })
    for (const res of await both(target.id, user.accessToken)) expect(res.statusCode).toBe(200)
  })

  it.each([
    ['no group at all', undefined],
    [
      'C on another user’s messages',
      [{ Resources: [`User::${randomUUID()}::Message`], Activities: 'C' }],
    ],
    [
      'R, U and D on the message resource',
      [{ Resources: ['User::.*::Message'], Activities: 'RUD' }],
    ],
    [
      'full rights on the user but not its messages',
      [{ Resources: ['User::.*'], Activities: 'CRUD' }],
    ],
    ['C on the user collection', [{ Resources: ['User::'], Activities: 'C' }]],
  ])('%s: 401, nothing sent', async (_label, policy) => {
    const key = policy ? await caller(policy) : (await createUser(t)).apiKey
    for (const res of await both(target.id, key)) {
      expect(res.statusCode, res.body).toBe(401)
      expect(errorOf(res).code).toBe('PERMISSION_DENIED')
    }
    expect(standIn.requests).toHaveLength(0)
  })

  it('no or a bad credential: 401 before the body is looked at', async () => {
    for (const auth of [undefined, 'not-a-key']) {
      const res = await t.api.post(`/v1/users/${target.id}/message/email`, {
        ...(auth ? { auth } : {}),
        json: { nonsense: true },
      })
      expect(res.statusCode).toBe(401)
      expect(errorOf(res).code).toBe('UNAUTHENTICATED')
    }
    expect(standIn.requests).toHaveLength(0)
  })

  it('an unknown user: 404 for a caller allowed on any user, 401 for one who is not', async () => {
    const unknown = randomUUID()
    for (const res of await both(unknown, t.admin.api_key)) {
      expect(res.statusCode).toBe(404)
      expect(errorOf(res).message).toBe('User not found')
    }
    const narrow = await caller([{ Resources: [`User::${target.id}::Message`], Activities: 'C' }])
    for (const res of await both(unknown, narrow)) expect(res.statusCode).toBe(401)
    expect(standIn.requests).toHaveLength(0)
  })

  it('a user of another account is unknown (404), whatever the policy says', async () => {
    const other = await t.newAccount()
    for (const res of await both(target.id, other.api_key)) expect(res.statusCode).toBe(404)
    expect(standIn.requests).toHaveLength(0)
  })

  it('a DEACTIVATED user is not messaged (400)', async () => {
    const gone = await userWith(t, attributes)
    expect((await t.api.delete(`/v1/users/${gone.id}`, { auth: t.admin.api_key })).statusCode).toBe(
      200,
    )
    for (const res of await both(gone.id, t.admin.api_key)) {
      expect(res.statusCode).toBe(400)
      expect(errorOf(res)).toMatchObject({
        code: 'USER_DEACTIVATED',
        message: 'The user is DEACTIVATED',
      })
    }
    expect(standIn.requests).toHaveLength(0)
  })

  it('PENDING and LOCKED users can be messaged (e.g. an invitation)', async () => {
    for (const status of ['PENDING', 'LOCKED']) {
      const u = await userWith(t, attributes)
      const put = await t.api.put(`/v1/users/${u.id}`, { auth: t.admin.api_key, form: { status } })
      expect(put.statusCode, put.body).toBe(200)
      for (const res of await both(u.id, t.admin.api_key))
        expect(res.statusCode, res.body).toBe(200)
    }
  })

  it('a bad body is refused (400) before the policy check (401), as on every route', async () => {
    const key = (await createUser(t)).apiKey
    const res = await sendEmail(t, target.id, emailBody({ provider: undefined }), key)
    expect(res.statusCode).toBe(400)
  })
})

describe('messaging: per-user hourly limit', () => {
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

  it(`sends at most ${MESSAGES_PER_USER.max} messages an hour to one user, whoever asks`, async () => {
    const target = await userWith(t, { email: 'limit@example.com', phone: '+15558675309' })
    const other = await userWith(t, { email: 'other@example.com', phone: '+15558675310' })
    // The window already holds all but one message (as many earlier requests would leave it).
    for (let i = 0; i < MESSAGES_PER_USER.max - 1; i++)
      await bumpWindow(
        t.deps.store.db,
        {
          scope: t.admin.account_id,
          key: `message\n${t.admin.account_id}\n${target.id}`,
        },
        clock.now(),
        MESSAGES_PER_USER.windowMs,
      )
    const body = emailBody({ substitutions: {} })
    expect((await sendEmail(t, target.id, body)).statusCode).toBe(200)
    const over = await sendSms(t, target.id, smsBody())
    expect(over.statusCode).toBe(429)
    expect(errorOf(over).code).toBe('TOO_MANY_MESSAGES')
    expect(standIn.requests.map((r) => r.provider)).toEqual(['sendgrid'])
    // Other users are unaffected; after the hour the user can be messaged again.
    expect((await sendEmail(t, other.id, body)).statusCode).toBe(200)
    clock.advance(MESSAGES_PER_USER.windowMs)
    expect((await sendEmail(t, target.id, body)).statusCode).toBe(200)
  })
})
