import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import {
  buildTestApp,
  type CallOptions,
  createUser,
  errorOf,
  type TestApp,
} from '../helpers/app.js'

/**
 * No SAT can obtain or create an access token, API key or access/secret key, or change a
 * password other than through `User::ID::Password` (issue 10, finding 1). The table covers every
 * route the app marks `vendsCredential`; a marked route without a case fails the suite.
 */
let t: TestApp
let victim: Awaited<ReturnType<typeof createUser>>
let sat: { id: string; http_auth: { username: string; password: string } }

const PASSWORD = 'victim password 1'
const FAR = '9999-12-31T00:00:00Z'
const CREDENTIAL_FIELDS = /"(access_token|api_key|access_key|secret_key)"/

/** Broad rights over users and groups, but no password grant: what an admin might hand out. */
const BROAD: PolicyStatement[] = [
  {
    Resources: [
      'User::',
      'User::.*',
      'User::$[id=self.id]',
      'Group::',
      'Group::.*',
      'Group::.*::GroupMembership::.*',
    ],
    Activities: 'CRUD',
  },
]

async function createSat(policy: PolicyStatement[], allowedUses?: number) {
  const res = await t.api.post('/v1/scoped_access_tokens', {
    auth: t.admin.api_key,
    json: {
      name: 'sat',
      policy,
      not_valid_after: new Date(Date.now() + 120_000).toISOString(),
      ...(allowedUses ? { allowed_uses: allowedUses } : {}),
    },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().scoped_access_token as typeof sat
}

/** What a credential change would alter: the users' credential rows, password hashes, key pairs. */
async function credentialState() {
  const db = t.deps.store.db
  const creds = await db
    .selectFrom('credentials')
    .select(['digest', 'user_id', 'kind', 'expires_at'])
    .orderBy('digest')
    .execute()
  const users = await db
    .selectFrom('users')
    .select(['id', 'password_hash', 'access_key_digest', 'secret_key_digest'])
    .orderBy('id')
    .execute()
  return { creds, users }
}

interface Attempt {
  url: () => string
  method: 'POST' | 'PUT'
  options?: () => CallOptions
  /** Public registration: allowed, but the new user's credentials are never handed to a SAT. */
  registers?: boolean
}

/** Per marked route, requests that would vend or change a credential if a SAT were let through. */
const ATTEMPTS: Record<string, Attempt[]> = {
  'POST /v1/users': [
    {
      method: 'POST',
      url: () => '/v1/users',
      options: () => ({
        form: { username: 'registered', password: 'a registered password', access_token: '1' },
      }),
      registers: true,
    },
  ],
  'PUT /v1/users/:user_id': [
    // The finding: a token for the SAT's own user (its creator), then for another user.
    {
      method: 'PUT',
      url: () => `/v1/users/${t.admin.userId}`,
      options: () => ({ form: { access_token: '1', access_token_not_valid_after: FAR } }),
    },
    {
      method: 'PUT',
      url: () => `/v1/users/${victim.id}`,
      options: () => ({ form: { access_token: '1' } }),
    },
    {
      method: 'PUT',
      url: () => `/v1/users/${victim.id}`,
      options: () => ({ multipart: { access_token: 'yes', username: victim.username } }),
    },
    // A password alone needs the password grant, which this SAT does not hold.
    {
      method: 'PUT',
      url: () => `/v1/users/${victim.id}`,
      options: () => ({ form: { password: 'taken over password' } }),
    },
    {
      method: 'PUT',
      url: () => `/v1/users/${t.admin.userId}`,
      options: () => ({ form: { password: 'taken over password' } }),
    },
    // A password with other changes is never a reset token's business.
    {
      method: 'PUT',
      url: () => `/v1/users/${victim.id}`,
      options: () => ({ form: { password: 'taken over password', username: victim.username } }),
    },
  ],
  'PUT /v1/users/:user_id/password': [
    {
      method: 'PUT',
      url: () => `/v1/users/${victim.id}/password`,
      options: () => ({ json: { password: 'taken over password' } }),
    },
  ],
  'POST /v1/users/:user_id/access_token': [
    {
      method: 'POST',
      url: () => `/v1/users/${victim.id}/access_token`,
      options: () => ({ form: { not_valid_after: FAR } }),
    },
  ],
  'POST /v1/users/:user_id/api_key': [
    { method: 'POST', url: () => `/v1/users/${victim.id}/api_key` },
    { method: 'POST', url: () => `/v1/users/${t.admin.userId}/api_key` },
  ],
  'POST /v1/users/:user_id/access_key': [
    { method: 'POST', url: () => `/v1/users/${victim.id}/access_key` },
  ],
  'POST /v1/auth/logout': [{ method: 'POST', url: () => '/v1/auth/logout' }],
  'POST /v1/auth/logout_all': [{ method: 'POST', url: () => '/v1/auth/logout_all' }],
}

beforeAll(async () => {
  t = await buildTestApp()
  victim = await createUser(t, { password: PASSWORD })
  sat = await createSat(BROAD)
})
afterAll(() => t.close())

describe('credential-vending routes refuse SATs', () => {
  it('the table covers every route marked vendsCredential', () => {
    expect(Object.keys(ATTEMPTS).sort()).toEqual([...t.app.credentialRoutes].sort())
  })

  it('every route whose request sets a password or token expiry, or whose answer must carry a key, is marked', () => {
    const doc = t.app.swagger() as {
      paths: Record<string, Record<string, { requestBody?: unknown; responses?: unknown }>>
    }
    const bodyFields = /"(password|access_token|not_valid_after|access_token_not_valid_after)":/
    const requiredKey = /"required":\[[^\]]*"(api_key|access_key|secret_key|http_auth)"/
    // Not credential vending: login is public (the password is the credential); a SAT mints
    // only narrower SATs (decision 50); MFA unenrollment checks a password, it sets none; an
    // SMS carries the caller's Twilio password to Twilio, never a Coffer credential.
    const exempt = [
      'POST /v1/auth/login',
      'POST /v1/scoped_access_tokens',
      'POST /v1/users/:user_id/mfa/unenroll',
      'POST /v1/users/:user_id/message/sms',
    ]
    const flagged = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(
          ([, op]) =>
            bodyFields.test(JSON.stringify(op.requestBody ?? {})) ||
            requiredKey.test(JSON.stringify(op.responses ?? {})),
        )
        .map(([m]) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
    )
    const unmarked = flagged.filter(
      (r) => !t.app.credentialRoutes.includes(r) && !exempt.includes(r),
    )
    expect(unmarked).toEqual([])
  })

  for (const [route, attempts] of Object.entries(ATTEMPTS)) {
    it(`${route}: a SAT gets no credential and changes none`, async () => {
      for (const attempt of attempts) {
        const before = await credentialState()
        const res: LightMyRequestResponse = await t.api.call(attempt.method, attempt.url(), {
          basic: sat.http_auth,
          ...(attempt.options?.() ?? {}),
        })
        const label = `${attempt.method} ${attempt.url()} ${JSON.stringify(attempt.options?.())}`
        expect(res.body, label).not.toMatch(CREDENTIAL_FIELDS)
        if (attempt.registers) {
          expect(res.statusCode, `${label}: ${res.body}`).toBe(200)
          const id = res.json().user.id as string
          const after = await credentialState()
          // The new user exists, holds no credential, and the others' are untouched.
          expect(after.creds).toEqual(before.creds)
          expect(after.users.filter((u) => u.id !== id)).toEqual(before.users)
        } else {
          expect(res.statusCode, `${label}: ${res.body}`).toBeGreaterThanOrEqual(400)
          expect(res.statusCode, label).toBeLessThan(500)
          errorOf(res)
          expect(await credentialState(), label).toEqual(before)
        }
      }
    })
  }
})

describe('the SAT escape of the review', () => {
  it('a one-use SAT with U on itself cannot turn into an access token (its use is kept)', async () => {
    const own = await createSat([{ Resources: ['User::$[id=self.id]'], Activities: 'U' }], 1)
    const res = await t.api.put(`/v1/users/${t.admin.userId}`, {
      basic: own.http_auth,
      form: { access_token: '1', access_token_not_valid_after: FAR },
    })
    expect(res.statusCode).toBe(401)
    expect(errorOf(res).code).toBe('CREDENTIAL_NOT_ALLOWED')
    expect(res.body).not.toContain('"access_token"')
    const row = await t.deps.store.db
      .selectFrom('scoped_access_tokens')
      .select('consumed_uses')
      .where('id', '=', own.id)
      .executeTakeFirstOrThrow()
    expect(Number(row.consumed_uses)).toBe(0)
  })

  it('a SAT may still update non-credential fields within its policy', async () => {
    const res = await t.api.put(`/v1/users/${victim.id}`, {
      basic: sat.http_auth,
      form: { attributes: Buffer.from('{"a":1}').toString('base64') },
    })
    expect(res.statusCode, res.body).toBe(200)
  })

  it('a reset token (U on User::ID::Password only) sets that password, on both password routes', async () => {
    const target = await createUser(t, { password: PASSWORD })
    for (const [url, options] of [
      [`/v1/users/${target.id}`, { form: { password: 'reset password one' } }],
      [`/v1/users/${target.id}/password`, { json: { password: 'reset password two' } }],
    ] as const) {
      const reset = await createSat(
        [{ Resources: [`User::${target.id}::Password`], Activities: 'U' }],
        1,
      )
      const res = await t.api.put(url, { basic: reset.http_auth, ...options })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.body).not.toMatch(CREDENTIAL_FIELDS)
    }
    const login = await t.api.post('/v1/auth/login', {
      form: {
        account_id: t.admin.account_id,
        username: target.username,
        password: 'reset password two',
      },
    })
    expect(login.statusCode).toBe(200)
  })
})

describe('the general update vends tokens to API keys only (as the token route does)', () => {
  it('an access token with U on a user gets 401 CREDENTIAL_NOT_ALLOWED for access_token=1', async () => {
    const boss = await createUser(t, { policy: [{ Resources: ['User::.*'], Activities: 'RU' }] })
    const asToken = await t.api.put(`/v1/users/${victim.id}`, {
      auth: boss.accessToken,
      form: { access_token: '1' },
    })
    expect(asToken.statusCode).toBe(401)
    expect(errorOf(asToken).code).toBe('CREDENTIAL_NOT_ALLOWED')
    const asKey = await t.api.put(`/v1/users/${victim.id}`, {
      auth: boss.apiKey,
      form: { access_token: '1' },
    })
    expect(asKey.statusCode).toBe(200)
    expect(typeof asKey.json().user.access_token).toBe('string')
  })

  it('a user may still change their own password with their access token', async () => {
    const self = await createUser(t, {
      password: PASSWORD,
      policy: [{ Resources: ['User::$[id=self.id]'], Activities: 'RU' }],
    })
    const res = await t.api.put(`/v1/users/${self.id}`, {
      auth: self.accessToken,
      form: { password: 'my own new password' },
    })
    expect(res.statusCode, res.body).toBe(200)
  })
})
