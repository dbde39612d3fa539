import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, createUser, type TestApp } from '../helpers/app.js'

/**
 * `session_revocation_on_password_change` (issue 13, part 2; default on): a new password ends the
 * user's *other* access tokens — every one but the token the change was made with, when that is
 * the user's own access token; all of them when an administrator's credential or a reset token
 * made it. API keys are no sessions and never end. Turned off, a new password ends none.
 * (test/http/sessions.test.ts covers the default in full.)
 */
const PASSWORD = 'many sessions 1'
const selfPolicy = [{ Resources: ['User::$[id=self.id]'], Activities: 'RU' }]
let t: TestApp

beforeAll(async () => {
  t = await buildTestApp()
})
afterAll(() => t.close())

async function setRevocation(on: boolean) {
  const res = await t.api.put(`/v1/accounts/${t.admin.account_id}/settings`, {
    auth: t.admin.api_key,
    json: { session_revocation_on_password_change: on },
  })
  expect(res.statusCode, res.body).toBe(200)
  expect(res.json().settings.session_revocation_on_password_change).toBe(on)
}

const works = async (credential: string) =>
  (await t.api.get('/v1/auth/me', { auth: credential })).statusCode === 200

async function sessions(username: string, n: number, password = PASSWORD): Promise<string[]> {
  const tokens: string[] = []
  for (let i = 0; i < n; i++) {
    const res = await t.api.post('/v1/auth/login', {
      form: { account_id: t.admin.account_id, username, password },
    })
    expect(res.statusCode, res.body).toBe(200)
    tokens.push(res.json().user.access_token)
  }
  return tokens
}

async function resetToken(userId: string) {
  const res = await t.api.post('/v1/scoped_access_tokens', {
    auth: t.admin.api_key,
    json: {
      name: 'reset',
      policy: [{ Resources: [`User::${userId}::Password`], Activities: 'U' }],
      not_valid_after: '2999-01-01T00:00:00Z',
      allowed_uses: 1,
    },
  })
  return res.json().scoped_access_token.http_auth as { username: string; password: string }
}

describe('session_revocation_on_password_change', () => {
  it('on (the default): the user’s own change keeps only the token it came with', async () => {
    const settings = await t.api.get(`/v1/accounts/${t.admin.account_id}/settings`, {
      auth: t.admin.api_key,
    })
    expect(settings.json().settings.session_revocation_on_password_change).toBe(true)
    const u = await createUser(t, { password: PASSWORD, policy: selfPolicy })
    const [current, other] = (await sessions(u.username, 2)) as [string, string]
    const res = await t.api.put(`/v1/users/${u.id}/password`, {
      auth: current,
      json: { password: 'my own new one 2' },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect([await works(current), await works(other), await works(u.apiKey)]).toEqual([
      true,
      false,
      true,
    ])
  })

  it('off: no change of password ends a session, whoever makes it', async () => {
    await setRevocation(false)
    try {
      const u = await createUser(t, { password: PASSWORD, policy: selfPolicy })
      const tokens = await sessions(u.username, 2)
      const changes = [
        () =>
          t.api.put(`/v1/users/${u.id}/password`, {
            auth: tokens[0],
            json: { password: 'changed by me 22' },
          }),
        () =>
          t.api.put(`/v1/users/${u.id}`, {
            auth: t.admin.api_key,
            form: { password: 'changed by admin 3' },
          }),
        async () =>
          t.api.put(`/v1/users/${u.id}/password`, {
            basic: await resetToken(u.id),
            json: { password: 'changed by reset 4' },
          }),
      ]
      for (const change of changes) {
        const res = await change()
        expect(res.statusCode, res.body).toBe(200)
        for (const token of [...tokens, u.accessToken]) expect(await works(token)).toBe(true)
      }
    } finally {
      await setRevocation(true)
    }
  })

  it('on again: an administrator’s change ends every access token, not the API key', async () => {
    const u = await createUser(t, { password: PASSWORD })
    const tokens = [u.accessToken, ...(await sessions(u.username, 2))]
    const res = await t.api.put(`/v1/users/${u.id}/password`, {
      auth: t.admin.api_key,
      json: { password: 'admin sets it 5' },
    })
    expect(res.statusCode, res.body).toBe(200)
    for (const token of tokens) expect(await works(token)).toBe(false)
    expect(await works(u.apiKey)).toBe(true)
  })
})
