import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { digestSecret } from '../../src/crypto/secrets.js'
import { buildTestApp, createUser, type TestApp } from '../helpers/app.js'

/**
 * Every issued secret has its account in `credential_directory` (migration 0012), and loses it
 * with the secret: the directory holds what is live, not a trail of every credential.
 */
let t: TestApp
beforeAll(async () => {
  t = await buildTestApp()
})
afterAll(() => t.close())

const accountOf = async (secret: string) =>
  (
    await t.deps.store.db
      .selectFrom('credential_directory')
      .select('account_id')
      .where('digest', '=', digestSecret(secret))
      .executeTakeFirst()
  )?.account_id

describe('credential directory', () => {
  it('names the account of API keys and access tokens, and forgets them when they end', async () => {
    const other = await t.newAccount()
    const u = await createUser(t, { auth: other.api_key })
    expect(await accountOf(u.apiKey)).toBe(other.account_id)
    expect(await accountOf(u.accessToken)).toBe(other.account_id)

    const logout = await t.api.post('/v1/auth/logout', { auth: u.accessToken })
    expect(logout.statusCode, logout.body).toBe(200)
    expect(await accountOf(u.accessToken)).toBeUndefined()

    const replaced = await t.api.post(`/v1/users/${u.id}/api_key`, { auth: other.api_key })
    expect(replaced.statusCode, replaced.body).toBe(200)
    const fresh = replaced.json().api_key as string
    expect(await accountOf(u.apiKey)).toBeUndefined()
    expect(await accountOf(fresh)).toBe(other.account_id)

    const gone = await t.api.delete(`/v1/users/${u.id}`, { auth: other.api_key })
    expect(gone.statusCode, gone.body).toBe(200)
    expect(await accountOf(fresh)).toBeUndefined()
  })

  it('names the account of a SAT by its password, and forgets it when the SAT is deleted', async () => {
    const res = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'directory',
        policy: [{ Resources: ['Vault::.*'], Activities: 'R' }],
        not_valid_after: '2999-01-01T00:00:00Z',
      },
    })
    expect(res.statusCode, res.body).toBe(200)
    const sat = res.json().scoped_access_token
    expect(await accountOf(sat.http_auth.password)).toBe(t.admin.account_id)
    const works = await t.api.get('/v1/vaults', { basic: sat.http_auth })
    expect(works.statusCode, works.body).toBe(200)
    const del = await t.api.delete(`/v1/scoped_access_tokens/${sat.id}`, { auth: t.admin.api_key })
    expect(del.statusCode, del.body).toBe(200)
    expect(await accountOf(sat.http_auth.password)).toBeUndefined()
    expect((await t.api.get('/v1/vaults', { basic: sat.http_auth })).statusCode).toBe(401)
  })
})
