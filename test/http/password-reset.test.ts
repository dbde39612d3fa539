import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import { logicalDump } from '../helpers/db-dump.js'
import { DYNAMIC_TEMPLATE_ID, TEMPLATE_ID } from '../helpers/messaging.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
} from '../helpers/providers.js'

const clock = new ManualClock('2030-01-01T00:00:00.000Z')
let t: TestApp
let providers: ProviderStandIn
const sendErrors: unknown[] = []

const flowBody = (overrides: Record<string, unknown> = {}) => {
  const body: Record<string, unknown> = {
    name: 'patients',
    sg_api_key: TEST_SENDGRID_KEY,
    sg_template_id: TEMPLATE_ID,
    user_email_value_spec: { user_attribute: 'email' },
    from_email_value_spec: { literal_value: 'support@example.com' },
    substitutions: { '{{name}}': { user_attribute: 'first_name' } },
    ...overrides,
  }
  for (const [k, v] of Object.entries(overrides)) if (v === undefined) delete body[k]
  return body
}

async function createFlow(overrides: Record<string, unknown> = {}, auth = t.admin.api_key) {
  const res = await t.api.post('/v1/password_reset_flows', { auth, json: flowBody(overrides) })
  if (res.statusCode !== 200) throw new Error(`flow create failed: ${res.body}`)
  return res.json().password_reset_flow as { id: string } & Record<string, unknown>
}

async function userWithEmail(password = 'old password 1') {
  const username = `u${Math.random().toString(36).slice(2)}`
  const res = await t.api.post('/v1/users', {
    auth: t.admin.api_key,
    form: {
      username,
      password,
      attributes: b64({ email: `${username}@example.com`, first_name: 'Ada' }),
    },
  })
  return { id: res.json().user.id as string, username, email: `${username}@example.com` }
}

const sendReset = (
  flowId: string,
  username: unknown,
  auth: { auth?: string; basic?: { username: string; password: string } } = {
    auth: t.admin.api_key,
  },
) => t.api.post(`/v1/password_reset_flows/${flowId}/email`, { ...auth, json: { username } })

/** The reset email SendGrid received last, and the Basic credential it carries. */
function lastResetEmail() {
  const sent = providers.requestsTo('sendgrid')
  const body = sent[sent.length - 1]?.json as {
    personalizations: { to: { email: string }[]; substitutions: Record<string, string> }[]
    from: { email: string }
    template_id: string
  }
  const subs = body.personalizations[0]?.substitutions ?? {}
  const [username, password] = Buffer.from(subs['{{reset_token}}'] as string, 'base64')
    .toString()
    .split(':') as [string, string]
  return { body, subs, basic: { username, password } }
}

const login = (username: string, password: string) =>
  t.api.post('/v1/auth/login', { form: { account_id: t.admin.account_id, username, password } })

beforeAll(async () => {
  providers = await startProviderStandIn()
  t = await buildTestApp({
    clock,
    providers: providers.config(),
    onResetEmailError: (e) => sendErrors.push(e),
  })
})
afterAll(async () => {
  await t.close()
  await providers.close()
})
beforeEach(() => {
  providers.reset()
  sendErrors.length = 0
  clock.set('2030-01-01T00:00:00.000Z')
})

describe('flows', () => {
  it('creates a flow without ever echoing the SendGrid key, and reads, lists and deletes it', async () => {
    const res = await t.api.post('/v1/password_reset_flows', {
      auth: t.admin.api_key,
      json: flowBody(),
    })
    expect(res.statusCode).toBe(200)
    const flow = res.json().password_reset_flow
    expect(flow).toEqual({
      id: expect.any(String),
      name: 'patients',
      sg_template_id: TEMPLATE_ID,
      user_email_value_spec: { user_attribute: 'email' },
      from_email_value_spec: { literal_value: 'support@example.com' },
      substitutions: { '{{name}}': { user_attribute: 'first_name' } },
      scoped_access_token_id: null,
    })
    const read = await t.api.get(`/v1/password_reset_flows/${flow.id}`, { auth: t.admin.api_key })
    expect(read.json().password_reset_flow).toEqual(flow)
    const list = await t.api.get('/v1/password_reset_flows', { auth: t.admin.api_key })
    expect(list.json().password_reset_flows.map((f: { id: string }) => f.id)).toContain(flow.id)
    for (const r of [res, read, list]) expect(r.body).not.toContain(TEST_SENDGRID_KEY)
    expect(await logicalDump(t.deps.store)).not.toContain(TEST_SENDGRID_KEY)
    const del = await t.api.delete(`/v1/password_reset_flows/${flow.id}`, { auth: t.admin.api_key })
    expect(del.statusCode).toBe(200)
    expect(
      (await t.api.get(`/v1/password_reset_flows/${flow.id}`, { auth: t.admin.api_key }))
        .statusCode,
    ).toBe(404)
    expect((await sendReset(flow.id, 'anyone')).statusCode).toBe(404)
  })

  it.each([
    [{ name: undefined }, 'name is required'],
    [{ name: 'x'.repeat(256) }, 'name must be at most 255 characters'],
    [{ sg_api_key: undefined }, 'sg_api_key is required'],
    [{ sg_api_key: 'has space' }, 'sg_api_key must be printable ASCII'],
    [{ sg_template_id: 5 }, 'sg_template_id is required'],
    [{ user_email_value_spec: undefined }, 'user_email_value_spec must be a value specifier'],
    [
      { user_email_value_spec: { literal_value: 'a@b.co' } },
      'user_email_value_spec must not be a literal_value',
    ],
    [
      { from_email_value_spec: { literal_value: 'not an email' } },
      'from_email_value_spec.literal_value',
    ],
    [
      { from_email_value_spec: { system_field: 'id' } },
      'from_email_value_spec.system_field must be username',
    ],
    [{ substitutions: [] }, 'substitutions must be an object'],
    [{ substitutions: { '<%name%>': { literal_value: 'x' } } }, 'must not use ASP-style'],
    [{ substitutions: { '{{reset_token}}': { literal_value: 'x' } } }, 'is filled in by Coffer'],
    [{ substitutions: { '{{x}}': 'plain' } }, 'substitutions.{{x}} must be a value specifier'],
    [
      {
        sg_template_id: DYNAMIC_TEMPLATE_ID,
        substitutions: { reset_token: { literal_value: 'x' } },
      },
      'substitutions.reset_token names the template variable of {{reset_token}}, which Coffer fills in',
    ],
    [
      {
        sg_template_id: DYNAMIC_TEMPLATE_ID,
        substitutions: { '{{ user_id }}': { literal_value: 'x' } },
      },
      'substitutions.{{ user_id }} names the template variable of {{user_id}}, which Coffer fills in',
    ],
    [
      {
        sg_template_id: DYNAMIC_TEMPLATE_ID,
        substitutions: { '{{name}}': { literal_value: 'x' }, name: { literal_value: 'y' } },
      },
      'substitutions.name names the same template variable as {{name}}',
    ],
  ])('refuses %j with a 400 naming the field', async (change, message) => {
    const res = await t.api.post('/v1/password_reset_flows', {
      auth: t.admin.api_key,
      json: flowBody(change),
    })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).message).toContain(message)
  })

  it('follows the policy table', async () => {
    const flow = await createFlow()
    const other = await createFlow({ name: 'other' })
    const reader = await createUser(t, {
      policy: [{ Resources: [`PasswordResetFlow::${flow.id}`], Activities: 'R' }],
    })
    expect(
      (await t.api.get(`/v1/password_reset_flows/${flow.id}`, { auth: reader.apiKey })).statusCode,
    ).toBe(200)
    expect(
      (await t.api.get(`/v1/password_reset_flows/${other.id}`, { auth: reader.apiKey })).statusCode,
    ).toBe(401)
    const list = await t.api.get('/v1/password_reset_flows', { auth: reader.apiKey })
    expect(list.json().password_reset_flows.map((f: { id: string }) => f.id)).toEqual([flow.id])
    expect(
      (await t.api.delete(`/v1/password_reset_flows/${flow.id}`, { auth: reader.apiKey }))
        .statusCode,
    ).toBe(401)
    expect(
      (await t.api.post('/v1/password_reset_flows', { auth: reader.apiKey, json: flowBody() }))
        .statusCode,
    ).toBe(401)
    expect((await sendReset(flow.id, 'x', { auth: reader.apiKey })).statusCode).toBe(401)
  })
})

describe('reset emails', () => {
  it('sends the exact SendGrid request, with a single-use credential for that user’s password only', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    const res = await sendReset(flow.id, user.username)
    expect(res.statusCode).toBe(200)
    expect(Object.keys(res.json()).sort()).toEqual(['result', 'transaction_id'])
    await t.deps.passwordResets.idle()
    expect(sendErrors).toEqual([])
    const [request] = providers.requestsTo('sendgrid')
    expect(request?.headers.authorization).toBe(`Bearer ${TEST_SENDGRID_KEY}`)
    const { body, subs, basic } = lastResetEmail()
    expect(body.template_id).toBe(TEMPLATE_ID)
    expect(body.from).toEqual({ email: 'support@example.com' })
    expect(body.personalizations[0]?.to).toEqual([{ email: user.email }])
    expect(subs['{{name}}']).toBe('Ada')
    expect(subs['{{user_id}}']).toBe(user.id)
    expect(subs['{{reset_token_expires_at}}']).toBe('2030-01-01T00:30:00.000Z')
    expect(basic.username).toMatch(/^sat-/)

    // It cannot read the user, nor touch another user…
    expect((await t.api.get(`/v2/users/${user.id}`, { basic })).statusCode).toBe(404)
    const other = await userWithEmail()
    expect(
      (
        await t.api.put(`/v1/users/${other.id}/password`, {
          basic,
          json: { password: 'hijacked pw 1' },
        })
      ).statusCode,
    ).toBe(401)
    // …it sets this user's password once, through either endpoint the SDKs use…
    const set = await t.api.put(`/v1/users/${user.id}/password`, {
      basic,
      json: { password: 'new password 2' },
    })
    expect(set.statusCode).toBe(200)
    expect((await login(user.username, 'new password 2')).statusCode).toBe(200)
    // …and never again.
    const again = await t.api.put(`/v1/users/${user.id}`, {
      basic,
      form: { password: 'third password 3' },
    })
    expect(again.statusCode).toBe(401)
    expect((await login(user.username, 'third password 3')).statusCode).toBe(401)
  })

  it('sends a dynamic template (d-…) its variables as dynamic_template_data, reset tags included', async () => {
    const flow = await createFlow({
      sg_template_id: DYNAMIC_TEMPLATE_ID,
      substitutions: { '{{first_name}}': { user_attribute: 'first_name' } },
    })
    const user = await userWithEmail()
    expect((await sendReset(flow.id, user.username)).statusCode).toBe(200)
    await t.deps.passwordResets.idle()
    expect(sendErrors).toEqual([])
    const [request, ...others] = providers.requestsTo('sendgrid')
    expect(others).toHaveLength(0)
    // SendGrid's stand-in refuses legacy substitutions for a dynamic template: it took this one.
    expect(request?.reply?.status).toBe(202)
    const body = request?.json as {
      personalizations: { dynamic_template_data: Record<string, string> }[]
    }
    expect(body).toMatchObject({ template_id: DYNAMIC_TEMPLATE_ID })
    expect(body.personalizations[0]).not.toHaveProperty('substitutions')
    const data = body.personalizations[0]?.dynamic_template_data ?? {}
    expect(Object.keys(data).sort()).toEqual([
      'first_name',
      'reset_token',
      'reset_token_expires_at',
      'user_id',
    ])
    expect(data).toMatchObject({
      first_name: 'Ada',
      user_id: user.id,
      reset_token_expires_at: '2030-01-01T00:30:00.000Z',
    })
    // The token in the template data is the working credential.
    const [username, password] = Buffer.from(data.reset_token as string, 'base64')
      .toString()
      .split(':') as [string, string]
    const set = await t.api.put(`/v1/users/${user.id}/password`, {
      basic: { username, password },
      json: { password: 'from a dynamic template 1' },
    })
    expect(set.statusCode, set.body).toBe(200)
  })

  it('for a user without an email attribute: the same answer, nothing sent, no link minted, the operator told', async () => {
    const flow = await createFlow()
    const username = `u${Math.random().toString(36).slice(2)}`
    const created = await t.api.post('/v1/users', {
      auth: t.admin.api_key,
      form: { username, password: 'a password 1', attributes: b64({ first_name: 'Ada' }) },
    })
    expect(created.statusCode).toBe(200)
    const res = await sendReset(flow.id, username)
    expect(res.statusCode).toBe(200)
    expect(res.json().result).toBe('success')
    await t.deps.passwordResets.idle()
    expect(providers.requestsTo('sendgrid')).toHaveLength(0)
    expect(sendErrors).toHaveLength(1)
    expect(String((sendErrors[0] as Error).message)).toContain('user_email_value_spec')
    const userId = created.json().user.id as string
    const minted = () =>
      t.deps.store.db
        .selectFrom('scoped_access_tokens')
        .select('id')
        .where('policy', 'like', `%User::${userId}::Password%`)
        .execute()
    expect(await minted()).toHaveLength(0)
    // Once the user has an email, the next request sends at once (the failure took no turn).
    const update = await t.api.put(`/v1/users/${userId}`, {
      auth: t.admin.api_key,
      form: { attributes: b64({ first_name: 'Ada', email: `${username}@example.com` }) },
    })
    expect(update.statusCode).toBe(200)
    await sendReset(flow.id, username)
    await t.deps.passwordResets.idle()
    expect(providers.requestsTo('sendgrid')).toHaveLength(1)
    expect(await minted()).toHaveLength(1)
  })

  it('expires after the configured time', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    await sendReset(flow.id, user.username)
    await t.deps.passwordResets.idle()
    const { basic } = lastResetEmail()
    clock.set('2030-01-01T00:30:00.000Z')
    const late = await t.api.put(`/v1/users/${user.id}/password`, {
      basic,
      json: { password: 'too late pw 1' },
    })
    expect(late.statusCode).toBe(401)
  })

  it('answers the same for unknown, deactivated and known usernames, and sends only for the known', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    const gone = await userWithEmail()
    await t.api.delete(`/v1/users/${gone.id}`, { auth: t.admin.api_key })
    const answers = []
    for (const name of [user.username, 'nobody-at-all', gone.username]) {
      const res = await sendReset(flow.id, name)
      answers.push({
        status: res.statusCode,
        keys: Object.keys(res.json()).sort(),
        result: res.json().result,
      })
    }
    expect(answers[1]).toEqual(answers[0])
    expect(answers[2]).toEqual(answers[0])
    await t.deps.passwordResets.idle()
    const sent = providers.requestsTo('sendgrid')
    expect(sent).toHaveLength(1)
    expect(lastResetEmail().body.personalizations[0]?.to).toEqual([{ email: user.email }])
  })

  it('does not look the user up before answering', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    providers.answerNext('sendgrid', {
      status: 202,
      delayMs: 300,
      headers: { 'x-message-id': 'late' },
    })
    const res = await sendReset(flow.id, user.username)
    expect(res.statusCode).toBe(200)
    // Answered while SendGrid is still waiting: the request never depends on the user's path.
    expect(providers.requestsTo('sendgrid').every((r) => r.reply === undefined)).toBe(true)
    await t.deps.passwordResets.idle()
  })

  it('validates the username', async () => {
    const flow = await createFlow()
    for (const [username, message] of [
      [undefined, 'username is required'],
      ['', 'username is required'],
      [7, 'username is required'],
      ['x'.repeat(256), 'username must be at most 255 characters'],
    ] as const) {
      const res = await sendReset(flow.id, username)
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toContain(message)
    }
  })

  it('deletes the credential when SendGrid refuses the email, and tells the operator only', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    providers.answerNext('sendgrid', { status: 401, body: { errors: [{ message: 'bad key' }] } })
    expect((await sendReset(flow.id, user.username)).statusCode).toBe(200)
    await t.deps.passwordResets.idle()
    expect(sendErrors).toHaveLength(1)
    const rows = await t.deps.store.db
      .selectFrom('scoped_access_tokens')
      .select('name')
      .where('name', 'like', 'password reset:%')
      .where('creator_id', '=', t.admin.userId)
      .execute()
    const before = rows.length
    // A later success leaves exactly one more.
    await sendReset(flow.id, user.username)
    await t.deps.passwordResets.idle()
    const after = await t.deps.store.db
      .selectFrom('scoped_access_tokens')
      .select('name')
      .where('name', 'like', 'password reset:%')
      .where('creator_id', '=', t.admin.userId)
      .execute()
    expect(after.length).toBe(before + 1)
    const sent = providers.requestsTo('sendgrid')
    const refused = sent[0]?.json as {
      personalizations: { substitutions: Record<string, string> }[]
    }
    const firstToken = refused.personalizations[0]?.substitutions['{{reset_token}}'] as string
    const [u, p] = Buffer.from(firstToken, 'base64').toString().split(':') as [string, string]
    const res = await t.api.put(`/v1/users/${user.id}/password`, {
      basic: { username: u, password: p },
      json: { password: 'never works 1' },
    })
    expect(res.statusCode).toBe(401)
  })

  it('sends only to users the caller may send this flow’s email to', async () => {
    const flow = await createFlow()
    const allowed = await userWithEmail()
    const notAllowed = await userWithEmail()
    const page = await createUser(t, {
      policy: [
        { Resources: [`PasswordResetFlow::${flow.id}::Email::${allowed.id}`], Activities: 'C' },
      ],
    })
    expect((await sendReset(flow.id, notAllowed.username, { auth: page.apiKey })).statusCode).toBe(
      200,
    )
    expect((await sendReset(flow.id, allowed.username, { auth: page.apiKey })).statusCode).toBe(200)
    await t.deps.passwordResets.idle()
    const sent = providers.requestsTo('sendgrid')
    expect(sent).toHaveLength(1)
    expect(lastResetEmail().body.personalizations[0]?.to).toEqual([{ email: allowed.email }])
  })

  it('works from a public page holding only a SAT', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'forgot page',
        policy: [{ Resources: [`PasswordResetFlow::${flow.id}::Email::.*`], Activities: 'C' }],
        not_valid_after: '2031-01-01T00:00:00.000Z',
      },
    })
    const basic = sat.json().scoped_access_token.http_auth
    expect((await sendReset(flow.id, user.username, { basic })).statusCode).toBe(200)
    await t.deps.passwordResets.idle()
    expect(providers.requestsTo('sendgrid')).toHaveLength(1)
  })
})

describe('linking a SAT', () => {
  const satWith = async (
    policy: PolicyStatement[],
    notValidAfter = '2030-01-01T01:00:00.000Z',
    auth = t.admin.api_key,
  ) => {
    const res = await t.api.post('/v1/scoped_access_tokens', {
      auth,
      json: { name: 'bound', policy, not_valid_after: notValidAfter },
    })
    return res.json().scoped_access_token as { id: string }
  }

  it('mints the reset credentials under the linked SAT', async () => {
    const flow = await createFlow()
    const chosen = await userWithEmail()
    const other = await userWithEmail()
    const bound = await satWith(
      [{ Resources: [`User::${chosen.id}::Password`], Activities: 'U' }],
      '2030-01-01T00:10:00.000Z',
    )
    const link = await t.api.post(`/v1/password_reset_flows/${flow.id}/link_sat`, {
      auth: t.admin.api_key,
      json: { scoped_access_token_id: bound.id },
    })
    expect(link.statusCode).toBe(200)
    expect(link.json().password_reset_flow.scoped_access_token_id).toBe(bound.id)

    // The other user's email is sent, but its credential is bounded by the linked SAT: useless.
    await sendReset(flow.id, other.username)
    await t.deps.passwordResets.idle()
    const forOther = lastResetEmail().basic
    expect(
      (
        await t.api.put(`/v1/users/${other.id}/password`, {
          basic: forOther,
          json: { password: 'pw other 1' },
        })
      ).statusCode,
    ).toBe(401)
    await sendReset(flow.id, chosen.username)
    await t.deps.passwordResets.idle()
    const forChosen = lastResetEmail().basic
    expect(
      (
        await t.api.put(`/v1/users/${chosen.id}/password`, {
          basic: forChosen,
          json: { password: 'pw chosen 1' },
        })
      ).statusCode,
    ).toBe(200)

    // Once the linked SAT expires, nothing more is issued (and the operator is told).
    clock.set('2030-01-01T00:10:00.000Z')
    const before = providers.requestsTo('sendgrid').length
    await sendReset(flow.id, chosen.username)
    await t.deps.passwordResets.idle()
    expect(providers.requestsTo('sendgrid')).toHaveLength(before)
    expect(sendErrors).toHaveLength(1)
  })

  it('refuses a SAT the caller does not manage, and bad input', async () => {
    const flow = await createFlow()
    const stranger = await createUser(t, {
      policy: [{ Resources: ['Vault::.*'], Activities: 'R' }],
    })
    const theirs = await satWith(
      [{ Resources: ['Vault::.*'], Activities: 'R' }],
      undefined,
      stranger.apiKey,
    )
    const cases: [unknown, number][] = [
      [theirs.id, 404],
      ['00000000-0000-4000-8000-000000000000', 404],
      [undefined, 400],
      [12, 400],
    ]
    for (const [id, status] of cases) {
      const res = await t.api.post(`/v1/password_reset_flows/${flow.id}/link_sat`, {
        auth: t.admin.api_key,
        json: id === undefined ? {} : { scoped_access_token_id: id },
      })
      expect(res.statusCode).toBe(status)
    }
  })
})

describe('abuse resistance', () => {
  it('sends at most one email a minute per user, and a new link replaces the old', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    await sendReset(flow.id, user.username)
    await t.deps.passwordResets.idle()
    const first = lastResetEmail().basic
    clock.advance(59_000)
    await sendReset(flow.id, user.username)
    await t.deps.passwordResets.idle()
    expect(providers.requestsTo('sendgrid')).toHaveLength(1)
    clock.advance(2_000)
    await sendReset(flow.id, user.username)
    await t.deps.passwordResets.idle()
    expect(providers.requestsTo('sendgrid')).toHaveLength(2)
    const second = lastResetEmail().basic
    const put = (basic: { username: string; password: string }) =>
      t.api.put(`/v1/users/${user.id}/password`, { basic, json: { password: 'fresh password 1' } })
    expect((await put(first)).statusCode).toBe(401)
    expect((await put(second)).statusCode).toBe(200)
  })

  it('20 concurrent requests send exactly one email with the one valid link (issue 12)', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => sendReset(flow.id, user.username)),
    )
    expect(answers.map((r) => r.statusCode)).toEqual(Array(20).fill(200))
    await t.deps.passwordResets.idle()
    expect(sendErrors).toEqual([])
    expect(providers.requestsTo('sendgrid')).toHaveLength(1)
    const links = await t.deps.store.db
      .selectFrom('scoped_access_tokens')
      .select('id')
      .where('account_id', '=', t.admin.account_id)
      .where('name', '=', `password reset: ${flow.id}`)
      .where('policy', 'like', `%${user.id}%`)
      .execute()
    expect(links).toHaveLength(1)
    const res = await t.api.put(`/v1/users/${user.id}/password`, {
      basic: lastResetEmail().basic,
      json: { password: 'fresh password 1' },
    })
    expect(res.statusCode).toBe(200)
  })

  it('a reset token cannot mint a token, read the user, or be spent by a bad password', async () => {
    const flow = await createFlow()
    const user = await userWithEmail()
    await sendReset(flow.id, user.username)
    await t.deps.passwordResets.idle()
    const { basic } = lastResetEmail()
    const mint = await t.api.post('/v1/scoped_access_tokens', {
      basic,
      json: {
        name: 'escape',
        policy: [{ Resources: [`User::${user.id}::Password`], Activities: 'U' }],
        not_valid_after: '2030-01-01T01:00:00.000Z',
      },
    })
    expect(mint.statusCode).toBe(400)
    expect(errorOf(mint).code).toBe('SAT_CANNOT_MINT')
    const sats = await t.api.get('/v1/scoped_access_tokens', { auth: t.admin.api_key })
    const reset = sats
      .json()
      .data.items.find((s: { id: string }) => `sat-${s.id}` === basic.username)
    expect(reset.consumed_uses).toBe(0)
    const short = await t.api.put(`/v1/users/${user.id}?full=true`, {
      basic,
      form: { password: 'short' },
    })
    expect(short.statusCode).toBe(400)
    const set = await t.api.put(`/v1/users/${user.id}?full=true`, {
      basic,
      form: { password: 'long enough now 1' },
    })
    expect(set.statusCode).toBe(200)
    expect(set.json().user.attributes).toBeUndefined()
    expect(set.body).not.toContain(b64({ email: user.email, first_name: 'Ada' }))
  })

  it('a flow created through a SAT stays within that SAT', async () => {
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'flow maker',
        policy: [
          {
            Resources: ['PasswordResetFlow::.*', 'PasswordResetFlow::.*::Email::.*'],
            Activities: 'CRUD',
          },
        ],
        not_valid_after: '2031-01-01T00:00:00.000Z',
      },
    })
    const { id: satId, http_auth: basic } = sat.json().scoped_access_token
    const made = await t.api.post('/v1/password_reset_flows', { basic, json: flowBody() })
    expect(made.statusCode).toBe(200)
    const flow = made.json().password_reset_flow
    expect(flow.scoped_access_token_id).toBe(satId)
    const victim = await userWithEmail()
    await sendReset(flow.id, victim.username, { basic })
    await t.deps.passwordResets.idle()
    const token = lastResetEmail().basic
    // Minted under the SAT, which holds no password grant: the token is useless.
    const res = await t.api.put(`/v1/users/${victim.id}/password`, {
      basic: token,
      json: { password: 'taken over pw 1' },
    })
    expect(res.statusCode).toBe(401)
  })
})
