import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  b64,
  buildTestApp,
  type CallOptions,
  createUser,
  errorOf,
  type TestApp,
} from '../helpers/app.js'

/**
 * GET/PUT /v1/accounts/{account_id}/settings (issue 13, part 2): defaults until changed, a
 * partial update of the named settings, exact JSON types and bounds (400 naming the field),
 * `Account::<id>::Settings` (R to read, U to change), the caller's own account only (404 for
 * another), an API key to change them.
 */
const DEFAULTS = {
  max_access_token_duration_seconds: null,
  require_mfa: false,
  password_min_length: 8,
  session_revocation_on_password_change: true,
  daily_operations_quota: null,
}

let t: TestApp
beforeAll(async () => {
  t = await buildTestApp()
})
afterAll(() => t.close())

const path = (accountId = t.admin.account_id) => `/v1/accounts/${accountId}/settings`
const read = (o: CallOptions, accountId?: string) => t.api.get(path(accountId), o)
const change = (json: unknown, o: CallOptions = { auth: t.admin.api_key }, accountId?: string) =>
  t.api.put(path(accountId), { ...o, json })

function expectInvalid(res: LightMyRequestResponse, message: string) {
  expect(res.statusCode, res.body).toBe(400)
  expect(errorOf(res)).toEqual({
    message,
    type: 'invalid_request_error',
    code: 'INVALID_PARAMETER',
  })
}

async function login(username: string, password: string) {
  const res = await t.api.post('/v1/auth/login', {
    form: { account_id: t.admin.account_id, username, password },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().user.access_token as string
}

describe('account settings: reading and changing', () => {
  it('a new account has the defaults, with no row stored until a change', async () => {
    const other = await t.newAccount()
    const res = await read({ auth: other.api_key }, other.account_id)
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().settings).toEqual(DEFAULTS)
    const rows = await t.deps.store.db
      .selectFrom('account_settings')
      .selectAll()
      .where('account_id', '=', other.account_id)
      .execute()
    expect(rows).toEqual([])
  })

  it('changes only the named settings and answers all of them', async () => {
    const other = await t.newAccount()
    const auth = { auth: other.api_key }
    const first = await change({ require_mfa: true }, auth, other.account_id)
    expect(first.statusCode, first.body).toBe(200)
    expect(first.json().settings).toEqual({ ...DEFAULTS, require_mfa: true })
    const second = await change(
      { password_min_length: 12, max_access_token_duration_seconds: 3600 },
      auth,
      other.account_id,
    )
    expect(second.json().settings).toEqual({
      ...DEFAULTS,
      require_mfa: true,
      password_min_length: 12,
      max_access_token_duration_seconds: 3600,
    })
    const third = await change(
      { max_access_token_duration_seconds: null, session_revocation_on_password_change: false },
      auth,
      other.account_id,
    )
    const expected = {
      ...DEFAULTS,
      max_access_token_duration_seconds: null,
      require_mfa: true,
      password_min_length: 12,
      session_revocation_on_password_change: false,
    }
    expect(third.json().settings).toEqual(expected)
    expect((await read(auth, other.account_id)).json().settings).toEqual(expected)
    // One account's settings are its own.
    expect((await read({ auth: t.admin.api_key })).json().settings).toEqual(DEFAULTS)
  })

  it('takes the account id in any case', async () => {
    const res = await read({ auth: t.admin.api_key }, t.admin.account_id.toUpperCase())
    expect(res.statusCode, res.body).toBe(200)
  })
})

describe('account settings: every bad input is a 400 naming the field', () => {
  const cap = 'max_access_token_duration_seconds'
  const capMessage = `${cap} must be null (no cap) or an integer from 60 to 31536000`
  const minMessage = 'password_min_length must be an integer from 8 to 128'

  it('the token cap: 60 to 31,536,000 seconds or null, a JSON integer', async () => {
    for (const bad of [59, 31_536_001, 3600.5, '3600', true, 0, -60])
      expectInvalid(await change({ [cap]: bad }), capMessage)
    for (const edge of [60, 31_536_000, null]) {
      const res = await change({ [cap]: edge })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json().settings[cap]).toBe(edge)
    }
  })

  it('the password minimum: 8 to 128, a JSON integer', async () => {
    for (const bad of [7, 129, 8.5, '12', null])
      expectInvalid(await change({ password_min_length: bad }), minMessage)
    for (const edge of [128, 8]) {
      const res = await change({ password_min_length: edge })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json().settings.password_min_length).toBe(edge)
    }
  })

  it('the switches: JSON true or false only', async () => {
    for (const field of ['require_mfa', 'session_revocation_on_password_change'])
      for (const bad of ['true', 1, 0, null, 'false'])
        expectInvalid(await change({ [field]: bad }), `${field} must be true or false`)
  })

  it('an unknown field is named, and nothing of the request is applied', async () => {
    const res = await change({ require_mfa: true, max_token_life: 60 })
    expectInvalid(
      res,
      'max_token_life is not an account setting (the settings are max_access_token_duration_seconds, require_mfa, password_min_length, session_revocation_on_password_change, daily_operations_quota)',
    )
    expect((await read({ auth: t.admin.api_key })).json().settings.require_mfa).toBe(false)
  })

  it('a body that names no setting, or is no JSON object, is refused', async () => {
    expectInvalid(
      await change({}),
      'body must name at least one of max_access_token_duration_seconds, require_mfa, password_min_length, session_revocation_on_password_change, daily_operations_quota',
    )
    expectInvalid(await change([{ require_mfa: true }]), 'body must be a JSON object of settings')
    const noBody = await t.api.put(path(), { auth: t.admin.api_key })
    expectInvalid(noBody, 'body must be a JSON object of settings')
    // A form sends text: "true" is not a boolean.
    const form = await t.api.put(path(), {
      auth: t.admin.api_key,
      form: { require_mfa: 'true' },
    })
    expectInvalid(form, 'require_mfa must be true or false')
    const uuid = await t.api.get('/v1/accounts/not-a-uuid/settings', { auth: t.admin.api_key })
    expectInvalid(uuid, 'account_id must be a valid UUID')
  })
})

describe('account settings: who may read and change them', () => {
  it('another account’s id is a 404, even for its own administrator’s policy shape', async () => {
    const other = await t.newAccount()
    const get = await read({ auth: t.admin.api_key }, other.account_id)
    expect(get.statusCode, get.body).toBe(404)
    expect(errorOf(get).code).toBe('NOT_FOUND')
    const put = await change({ require_mfa: true }, { auth: t.admin.api_key }, other.account_id)
    expect(put.statusCode, put.body).toBe(404)
    expect((await read({ auth: other.api_key }, other.account_id)).json().settings).toEqual(
      DEFAULTS,
    )
  })

  it('reading needs R on Account::<id>::Settings, changing U', async () => {
    const none = await createUser(t, { policy: [{ Resources: ['Vault::.*'], Activities: 'R' }] })
    expect(errorOf(await read({ auth: none.apiKey })).code).toBe('PERMISSION_DENIED')
    const reader = await createUser(t, {
      policy: [{ Resources: [`Account::${t.admin.account_id}::Settings`], Activities: 'R' }],
    })
    const ok = await read({ auth: reader.apiKey })
    expect(ok.statusCode, ok.body).toBe(200)
    const refused = await change({ require_mfa: true }, { auth: reader.apiKey })
    expect(refused.statusCode, refused.body).toBe(401)
    expect(errorOf(refused).code).toBe('PERMISSION_DENIED')
    const writer = await createUser(t, {
      policy: [{ Resources: ['Account::.*::Settings'], Activities: 'U' }],
    })
    const changed = await change({ password_min_length: 9 }, { auth: writer.apiKey })
    expect(changed.statusCode, changed.body).toBe(200)
    expect(errorOf(await read({ auth: writer.apiKey })).code).toBe('PERMISSION_DENIED')
    expect((await change({ password_min_length: 8 })).statusCode).toBe(200)
  })

  it('an access token may read them; changing them takes an API key', async () => {
    const password = 'settings reader 1'
    const admin = await createUser(t, {
      password,
      policy: [{ Resources: ['Account::.*::Settings'], Activities: 'RU' }],
    })
    const token = await login(admin.username, password)
    const get = await read({ auth: token })
    expect(get.statusCode, get.body).toBe(200)
    const put = await change({ require_mfa: true }, { auth: token })
    expect(put.statusCode, put.body).toBe(401)
    expect(errorOf(put).code).toBe('CREDENTIAL_NOT_ALLOWED')
    expect((await read({ auth: t.admin.api_key })).json().settings.require_mfa).toBe(false)
    const byKey = await change({ require_mfa: false }, { auth: admin.apiKey })
    expect(byKey.statusCode, byKey.body).toBe(200)
  })

  it('a SAT can neither read nor change them, whatever its policy', async () => {
    const res = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'settings',
        policy: [{ Resources: ['Account::.*::Settings'], Activities: 'RU' }],
        not_valid_after: '2999-01-01T00:00:00Z',
      },
    })
    expect(res.statusCode, res.body).toBe(200)
    const basic = res.json().scoped_access_token.http_auth
    for (const r of [
      await t.api.get(path(), { basic }),
      await t.api.put(path(), { basic, json: { require_mfa: true } }),
    ]) {
      expect(r.statusCode, r.body).toBe(401)
      expect(errorOf(r).code).toBe('CREDENTIAL_NOT_ALLOWED')
    }
  })

  it('a group policy naming Account::<id>::Settings is accepted and shown as given', async () => {
    const policy = [{ Resources: [`Account::${t.admin.account_id}::Settings`], Activities: 'RU' }]
    const res = await t.api.post('/v1/groups', {
      auth: t.admin.api_key,
      form: { name: 'settings admins', policy: b64(policy) },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().group.policy).toEqual(policy)
  })

  it('the bootstrap administrator group of a new account holds the grant', async () => {
    const other = await t.newAccount()
    const groups = await t.api.get('/v1/groups', { auth: other.api_key })
    const admin = groups.json().groups.find((g: { name: string }) => g.name === 'FULL_ADMIN')
    expect(admin.policy[0].Resources).toContain('Account::.*::Settings')
  })
})
