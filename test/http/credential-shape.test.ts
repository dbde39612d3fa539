import { createHash, randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addDigest } from '../../src/store/credential-directory.repo.js'
import { basicHeader, buildTestApp, createUser, type TestApp } from '../helpers/app.js'

/**
 * TrueVault's API keys and access tokens were 36 characters long, and a Node client of the time
 * builds its header as `"Basic " + base64(key) + "Og=="` (base64 of `:`). That header is only
 * well-formed base64 when the key's length is a multiple of 3, so every credential Coffer issues
 * is 36 characters (216 random bits); the 43-character ones of earlier releases keep working.
 */
const ogHeader = (key: string) => `Basic ${Buffer.from(key).toString('base64')}Og==`

/** How the previous release made and stored a credential: 32 random bytes, SHA-256 digest. */
const oldFormatCredential = () => randomBytes(32).toString('base64url')
const oldDigest = (secret: string) => createHash('sha256').update(secret).digest('base64url')

const SHAPE = /^[A-Za-z0-9_-]{36}$/

describe('credential shape: 36 characters, the Og== header works', () => {
  let t: TestApp
  let base: string
  let admin: string

  beforeAll(async () => {
    t = await buildTestApp()
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
    admin = t.admin.api_key
  })
  afterAll(() => t?.close())

  const call = (path: string, authorization: string, form?: Record<string, string>) =>
    fetch(`${base}${path}`, {
      method: form ? 'POST' : 'GET',
      headers: { authorization },
      ...(form ? { body: new URLSearchParams(form) } : {}),
    })

  const put = (path: string, form: Record<string, string>) =>
    fetch(`${base}${path}`, {
      method: 'PUT',
      headers: { authorization: ogHeader(admin) },
      body: new URLSearchParams(form),
    })

  /** The credential is 36 characters and the Og== header built from it authenticates its user. */
  async function expectWorks(credential: unknown, userId: string) {
    expect(credential).toMatch(SHAPE)
    const me = await call('/v1/auth/me', ogHeader(credential as string))
    expect(me.status).toBe(200)
    expect(((await me.json()) as { user: { id: string } }).user.id).toBe(userId)
  }

  it('the bootstrap admin’s API key (account create)', async () => {
    await expectWorks(admin, t.admin.userId)
    // A fresh account, as `coffer account create` makes it.
    const other = await t.newAccount()
    await expectWorks(other.api_key, other.userId)
  })

  it('user create: the API key and the access token', async () => {
    const res = await call('/v1/users', ogHeader(admin), {
      username: `u-${randomBytes(4).toString('hex')}`,
      password: 'long enough',
    })
    expect(res.status).toBe(200)
    const { user } = (await res.json()) as {
      user: { id: string; api_key: string; access_token: string }
    }
    await expectWorks(user.api_key, user.id)
    await expectWorks(user.access_token, user.id)
  })

  it('login', async () => {
    const u = await createUser(t, { password: 'long enough' })
    const res = await call('/v1/auth/login', '', {
      account_id: t.admin.account_id,
      username: u.username,
      password: 'long enough',
    })
    expect(res.status).toBe(200)
    const { user } = (await res.json()) as { user: { access_token: string } }
    await expectWorks(user.access_token, u.id)
  })

  it('the access token and API key routes, and update with access_token=1', async () => {
    const u = await createUser(t)
    const token = await call(`/v1/users/${u.id}/access_token`, ogHeader(admin), {})
    expect(token.status).toBe(200)
    await expectWorks(
      ((await token.json()) as { user: { access_token: string } }).user.access_token,
      u.id,
    )

    const key = await call(`/v1/users/${u.id}/api_key`, ogHeader(admin), {})
    expect(key.status).toBe(200)
    await expectWorks(((await key.json()) as { api_key: string }).api_key, u.id)

    const updated = await put(`/v1/users/${u.id}`, { access_token: '1' })
    expect(updated.status).toBe(200)
    await expectWorks(
      ((await updated.json()) as { user: { access_token: string } }).user.access_token,
      u.id,
    )
  })

  it('credentials are stored only as digests', async () => {
    const u = await createUser(t)
    const rows = await t.deps.store.db
      .selectFrom('credentials')
      .select(['digest'])
      .where('user_id', '=', u.id)
      .execute()
    const digests = rows.map((r) => r.digest)
    expect(digests).toContain(oldDigest(u.apiKey))
    expect(digests).toContain(oldDigest(u.accessToken))
    expect(JSON.stringify(rows)).not.toContain(u.apiKey)
  })

  it('a wrong 36-character key is refused (401)', async () => {
    const res = await call('/v1/vaults', ogHeader(randomBytes(27).toString('base64url')))
    expect(res.status).toBe(401)
  })

  describe('credentials written by the previous release (43 characters) keep working', () => {
    async function insertOld(
      userId: string,
      kind: 'api_key' | 'access_token',
      accountId = t.admin.account_id,
    ) {
      const secret = oldFormatCredential()
      expect(secret).toHaveLength(43)
      const now = new Date()
      // Its account in the directory, as migration 0012 records every credential issued before.
      await addDigest(t.deps.store.db, oldDigest(secret), accountId)
      await t.deps.store.db
        .insertInto('credentials')
        .values({
          digest: oldDigest(secret),
          account_id: accountId,
          user_id: userId,
          kind,
          expires_at: kind === 'api_key' ? null : new Date(now.getTime() + 3_600_000).toISOString(),
          created_at: now.toISOString(),
        })
        .execute()
      return secret
    }

    it.each(['api_key', 'access_token'] as const)(
      'an old %s, in the usual header',
      async (kind) => {
        const u = await createUser(t)
        if (kind === 'api_key')
          await t.deps.store.db.deleteFrom('credentials').where('user_id', '=', u.id).execute()
        const old = await insertOld(u.id, kind)
        const me = await call('/v1/auth/me', basicHeader(old))
        expect(me.status).toBe(200)
        expect(((await me.json()) as { user: { id: string } }).user.id).toBe(u.id)
      },
    )

    it('an old API key, even in the Og== header (two padded base64 pieces)', async () => {
      // An account's admin whose key the previous release issued.
      const owner = await t.newAccount()
      await t.deps.store.db.deleteFrom('credentials').where('user_id', '=', owner.userId).execute()
      const old = await insertOld(owner.userId, 'api_key', owner.account_id)
      expect(ogHeader(old)).toMatch(/=Og==$/)
      const me = await call('/v1/auth/me', ogHeader(old))
      expect(me.status).toBe(200)
      // It can replace itself with a new, 36-character key.
      const key = await call(`/v1/users/${owner.userId}/api_key`, ogHeader(old), {})
      expect(key.status).toBe(200)
      const fresh = ((await key.json()) as { api_key: string }).api_key
      await expectWorks(fresh, owner.userId)
      expect((await call('/v1/vaults', basicHeader(old))).status).toBe(401)
    })
  })
})
