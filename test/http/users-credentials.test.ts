import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import { expectNoSecrets } from '../helpers/no-secrets.js'

const HOUR = 60 * 60 * 1000
const PASSWORD = 'first password 1'
const NEW_PASSWORD = 'second password 2'

describe('user credentials, password and deletion', () => {
  const clock = new ManualClock()
  let t: TestApp
  let admin: string
  /** The admin's access token (from a password login, valid for a year). */
  let adminToken: string
  /** A group that lets its members read themselves, so a live credential can be told apart. */
  let selfRead: string
  const uniq = () => `u-${Math.random().toString(36).slice(2, 10)}`

  const login = (username: string, password: string) =>
    t.api.post('/v1/auth/login', {
      form: { account_id: t.admin.account_id, username, password },
    })
  const me = (credential: string) => t.api.get('/v1/auth/me', { auth: credential })
  const readUser = (id: string, auth = admin) => t.api.get(`/v1/users/${id}?full=true`, { auth })
  /** A live credential reads its own user; a dead one gets 401 (and 400 on /v1/auth/me). */
  const expectAlive = async (credential: string, id: string) => {
    expect((await me(credential)).statusCode).toBe(200)
    expect((await t.api.get(`/v1/users/${id}`, { auth: credential })).statusCode).toBe(200)
  }
  const expectDead = async (credential: string, id: string) => {
    expect((await me(credential)).statusCode).toBe(400)
    const res = await t.api.get(`/v1/users/${id}`, { auth: credential })
    expect(res.statusCode).toBe(401)
    errorOf(res)
  }
  const newGroup = async (policy: PolicyStatement[] = []) => {
    const res = await t.api.post('/v1/groups', {
      auth: admin,
      form: { name: `g-${uniq()}`, policy: b64(policy) },
    })
    expect(res.statusCode).toBe(200)
    return res.json().group.id as string
  }
  /** A user with a password who may read itself. */
  const newUser = async (form: Record<string, string> = {}) => {
    const username = uniq()
    const res = await t.api.post('/v1/users', {
      auth: admin,
      form: { username, password: PASSWORD, group_ids: selfRead, ...form },
    })
    expect(res.statusCode).toBe(200)
    const u = res.json().user
    return {
      id: u.id as string,
      username,
      apiKey: u.api_key as string,
      accessToken: u.access_token as string,
    }
  }

  beforeAll(async () => {
    t = await buildTestApp({ clock })
    admin = t.admin.api_key
    // Tests below move the clock by days: this token outlives them.
    const res = await t.api.post('/v1/auth/login', {
      form: {
        account_id: t.admin.account_id,
        username: t.admin.username,
        password: t.admin.password,
        not_valid_after: new Date(clock.now().getTime() + 30 * 24 * HOUR).toISOString(),
      },
    })
    expect(res.statusCode).toBe(200)
    adminToken = res.json().user.access_token
    selfRead = await newGroup([{ Resources: ['User::$[id=self.id]'], Activities: 'R' }])
  })
  afterAll(() => t.close())

  describe('PUT /v1/users/{id}/password', () => {
    const setPassword = (id: string, password: unknown, auth = admin) =>
      t.api.put(`/v1/users/${id}/password`, { auth, json: { password } })

    it('sets the password from a JSON body: the new one logs in, the old one not', async () => {
      const u = await newUser()
      const res = await setPassword(u.id, NEW_PASSWORD)
      expect(res.statusCode).toBe(200)
      expect(res.json().result).toBe('success')
      expect(res.json().user).toMatchObject({ id: u.id, username: u.username })
      expectNoSecrets(res, PASSWORD, NEW_PASSWORD)
      const ok = await login(u.username, NEW_PASSWORD)
      expect(ok.statusCode).toBe(200)
      expect(ok.json().user.id).toBe(u.id)
      expect((await login(u.username, PASSWORD)).statusCode).toBe(401)
    })

    it('gives a password to a user created without one', async () => {
      const created = await t.api.post('/v1/users', {
        auth: admin,
        form: { username: uniq() },
      })
      const { id, username } = created.json().user
      expect((await login(username, NEW_PASSWORD)).statusCode).toBe(401)
      expect((await setPassword(id, NEW_PASSWORD)).statusCode).toBe(200)
      expect((await login(username, NEW_PASSWORD)).statusCode).toBe(200)
    })

    it('works with U on User::ID::Password or on User::ID, and is 401 with neither', async () => {
      const target = await newUser()
      const other = await newUser()
      const viaPassword = await createUser(t, {
        policy: [{ Resources: [`User::${target.id}::Password`], Activities: 'U' }],
      })
      const viaUser = await createUser(t, {
        policy: [{ Resources: [`User::${target.id}`], Activities: 'U' }],
      })
      const neither = await createUser(t, {
        policy: [
          { Resources: [`User::${target.id}`], Activities: 'CRD' },
          { Resources: [`User::${target.id}::Password`], Activities: 'CRD' },
          { Resources: [`User::${other.id}::Password`, `User::${other.id}`], Activities: 'U' },
        ],
      })
      const denied = await setPassword(target.id, NEW_PASSWORD, neither.apiKey)
      expect(denied.statusCode).toBe(401)
      errorOf(denied)
      expect((await login(target.username, PASSWORD)).statusCode).toBe(200)

      expect((await setPassword(target.id, 'password via P', viaPassword.apiKey)).statusCode).toBe(
        200,
      )
      expect((await login(target.username, 'password via P')).statusCode).toBe(200)
      expect((await setPassword(target.id, NEW_PASSWORD, viaUser.accessToken)).statusCode).toBe(200)
      expect((await login(target.username, NEW_PASSWORD)).statusCode).toBe(200)
    })

    it('answers 404 for an unknown user', async () => {
      const res = await setPassword(randomUUID(), NEW_PASSWORD)
      expect(res.statusCode).toBe(404)
      errorOf(res)
    })

    it('refuses a short or missing password with 400, keeping the old one', async () => {
      const u = await newUser()
      const short = await setPassword(u.id, 'seven77')
      expect(short.statusCode).toBe(400)
      expect(errorOf(short).message).toContain('password')
      const missing = await t.api.put(`/v1/users/${u.id}/password`, { auth: admin, json: {} })
      expect(missing.statusCode).toBe(400)
      expect(errorOf(missing).message).toContain('password')
      expect((await login(u.username, PASSWORD)).statusCode).toBe(200)
    })

    it('answers 401 to a bad key', async () => {
      const u = await newUser()
      expect((await setPassword(u.id, NEW_PASSWORD, 'no-such-key')).statusCode).toBe(401)
    })
  })

  describe('DELETE /v1/users/{id}', () => {
    it('deactivates the user: credentials die, groups are left, the username is freed', async () => {
      const g1 = await newGroup()
      const g2 = await newGroup()
      const u = await newUser({ group_ids: `${g1},${g2},${selfRead}` })
      await expectAlive(u.apiKey, u.id)
      await expectAlive(u.accessToken, u.id)

      const res = await t.api.delete(`/v1/users/${u.id}`, { auth: admin })
      expect(res.statusCode).toBe(200)
      expect(res.json().user).toMatchObject({
        id: u.id,
        user_id: u.id,
        username: u.username,
        status: 'DEACTIVATED',
      })
      expectNoSecrets(res, PASSWORD, NEW_PASSWORD)

      await expectDead(u.apiKey, u.id)
      await expectDead(u.accessToken, u.id)
      expect((await login(u.username, PASSWORD)).statusCode).toBe(401)
      for (const g of [g1, g2, selfRead]) {
        const group = await t.api.get(`/v1/groups/${g}?full=true`, { auth: admin })
        expect(group.statusCode).toBe(200)
        expect(group.json().group.user_ids).not.toContain(u.id)
      }
      // No data is purged: the user is still there, DEACTIVATED and in no group.
      const after = await readUser(u.id)
      expect(after.json().user).toMatchObject({ status: 'DEACTIVATED', group_ids: [] })

      const reuse = await t.api.post('/v1/users', {
        auth: admin,
        form: { username: u.username, password: PASSWORD, group_ids: selfRead },
      })
      expect(reuse.statusCode).toBe(200)
      expect(reuse.json().user.id).not.toBe(u.id)
      // The new user's credentials are its own; the old ones stay dead.
      await expectAlive(reuse.json().user.api_key, reuse.json().user.id)
      await expectDead(u.apiKey, u.id)
      expect((await login(u.username, PASSWORD)).json().user.id).toBe(reuse.json().user.id)
    })

    it('deleting again, or an unknown user, is a 404; a malformed id a 400', async () => {
      const u = await newUser()
      expect((await t.api.delete(`/v1/users/${u.id}`, { auth: admin })).statusCode).toBe(200)
      const again = await t.api.delete(`/v1/users/${u.id}`, { auth: admin })
      expect(again.statusCode).toBe(404)
      errorOf(again)
      expect((await t.api.delete(`/v1/users/${randomUUID()}`, { auth: admin })).statusCode).toBe(
        404,
      )
      expect((await t.api.delete('/v1/users/xyz', { auth: admin })).statusCode).toBe(400)
    })

    it('deletes PENDING and LOCKED users too', async () => {
      for (const status of ['PENDING', 'LOCKED']) {
        const u = await newUser({ status })
        const res = await t.api.delete(`/v1/users/${u.id}`, { auth: admin })
        expect(res.statusCode).toBe(200)
        expect(res.json().user.status).toBe('DEACTIVATED')
      }
    })

    it('needs D on the user (401 otherwise, the user stays)', async () => {
      const target = await newUser()
      const noDelete = await createUser(t, {
        policy: [{ Resources: ['User::', 'User::.*'], Activities: 'CRU' }],
      })
      const denied = await t.api.delete(`/v1/users/${target.id}`, { auth: noDelete.apiKey })
      expect(denied.statusCode).toBe(401)
      errorOf(denied)
      expect((await readUser(target.id)).json().user.status).toBe('ACTIVATED')
      await expectAlive(target.apiKey, target.id)

      const deleter = await createUser(t, {
        policy: [{ Resources: [`User::${target.id}`], Activities: 'D' }],
      })
      const ok = await t.api.delete(`/v1/users/${target.id}`, { auth: deleter.accessToken })
      expect(ok.statusCode).toBe(200)
      expect(ok.json().user.status).toBe('DEACTIVATED')
    })

    it('a user with D on User::$[id=self.id] can delete itself, and nobody else', async () => {
      const other = await newUser()
      const self = await createUser(t, {
        policy: [{ Resources: ['User::$[id=self.id]'], Activities: 'RD' }],
      })
      expect((await t.api.delete(`/v1/users/${other.id}`, { auth: self.apiKey })).statusCode).toBe(
        401,
      )
      const res = await t.api.delete(`/v1/users/${self.id}`, { auth: self.apiKey })
      expect(res.statusCode).toBe(200)
      expect(res.json().user.status).toBe('DEACTIVATED')
      expect((await me(self.apiKey)).statusCode).toBe(400)
    })

    it('answers 401 to a bad key', async () => {
      const u = await newUser()
      expect((await t.api.delete(`/v1/users/${u.id}`, { auth: 'no-such-key' })).statusCode).toBe(
        401,
      )
    })
  })

  describe('POST /v1/users/{id}/access_token', () => {
    const vend = (id: string, o: Parameters<TestApp['api']['post']>[1] = {}) =>
      t.api.post(`/v1/users/${id}/access_token`, { auth: admin, ...o })

    it('vends a working token with the default 24-hour life', async () => {
      const u = await newUser()
      const res = await vend(u.id)
      expect(res.statusCode).toBe(200)
      const user = res.json().user
      expect(user).toMatchObject({ id: u.id, user_id: u.id, username: u.username })
      expect(typeof user.access_token).toBe('string')
      expect(user).not.toHaveProperty('api_key')
      expectNoSecrets(res, PASSWORD, NEW_PASSWORD)
      await expectAlive(user.access_token, u.id)
      clock.advance(24 * HOUR - 60_000)
      await expectAlive(user.access_token, u.id)
      clock.advance(120_000)
      await expectDead(user.access_token, u.id)
    })

    it('accepts the empty multipart body the SDK sends', async () => {
      const u = await newUser()
      const res = await vend(u.id, { multipart: {} })
      expect(res.statusCode).toBe(200)
      await expectAlive(res.json().user.access_token, u.id)
    })

    it('honours not_valid_after from a urlencoded form', async () => {
      const u = await newUser()
      const expiry = new Date(clock.now().getTime() + HOUR).toISOString()
      const res = await vend(u.id, { form: { not_valid_after: expiry } })
      expect(res.statusCode).toBe(200)
      const token = res.json().user.access_token
      await expectAlive(token, u.id)
      clock.advance(HOUR + 1000)
      await expectDead(token, u.id)
    })

    it('honours the SDK\'s "not_valid_after " (trailing space) in a multipart body', async () => {
      const u = await newUser()
      const expiry = new Date(clock.now().getTime() + HOUR).toISOString()
      const res = await vend(u.id, { multipart: { 'not_valid_after ': expiry } })
      expect(res.statusCode).toBe(200)
      const token = res.json().user.access_token
      await expectAlive(token, u.id)
      clock.advance(HOUR - 1000)
      await expectAlive(token, u.id)
      clock.advance(2000)
      await expectDead(token, u.id)
    })

    it('refuses a not_valid_after in the past with 400', async () => {
      const u = await newUser()
      const past = new Date(clock.now().getTime() - 1000).toISOString()
      const res = await vend(u.id, { form: { not_valid_after: past } })
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toContain('not_valid_after')
    })

    it('takes an API key only: an access token caller gets 401', async () => {
      const u = await newUser()
      const res = await vend(u.id, { auth: adminToken })
      expect(res.statusCode).toBe(401)
      errorOf(res)
      // The admin token itself is fine elsewhere.
      expect((await readUser(u.id, adminToken)).statusCode).toBe(200)
    })

    it('answers 400 for a DEACTIVATED user and 404 for an unknown one', async () => {
      const u = await newUser()
      await t.api.delete(`/v1/users/${u.id}`, { auth: admin })
      const gone = await vend(u.id)
      expect(gone.statusCode).toBe(400)
      errorOf(gone)
      const missing = await vend(randomUUID())
      expect(missing.statusCode).toBe(404)
      errorOf(missing)
    })
  })

  describe('POST /v1/users/{id}/api_key', () => {
    const rotate = (id: string, auth = admin) => t.api.post(`/v1/users/${id}/api_key`, { auth })

    it('returns a new working key; the old key is refused at once', async () => {
      const u = await newUser()
      await expectAlive(u.apiKey, u.id)
      const res = await rotate(u.id)
      expect(res.statusCode).toBe(200)
      const key = res.json().api_key
      expect(typeof key).toBe('string')
      expect(key).not.toBe(u.apiKey)
      expect(Object.keys(res.json()).sort()).toEqual(['api_key', 'result', 'transaction_id'])
      await expectDead(u.apiKey, u.id)
      await expectAlive(key, u.id)
      const second = await rotate(u.id)
      await expectDead(key, u.id)
      await expectAlive(second.json().api_key, u.id)
    })

    it('takes an API key only: an access token caller gets 401', async () => {
      const u = await newUser()
      const res = await rotate(u.id, adminToken)
      expect(res.statusCode).toBe(401)
      errorOf(res)
      await expectAlive(u.apiKey, u.id)
    })

    it('needs U on the user', async () => {
      const u = await newUser()
      const reader = await createUser(t, {
        policy: [{ Resources: [`User::${u.id}`], Activities: 'R' }],
      })
      expect((await rotate(u.id, reader.apiKey)).statusCode).toBe(401)
      await expectAlive(u.apiKey, u.id)
      const updater = await createUser(t, {
        policy: [{ Resources: [`User::${u.id}`], Activities: 'U' }],
      })
      const ok = await rotate(u.id, updater.apiKey)
      expect(ok.statusCode).toBe(200)
      await expectDead(u.apiKey, u.id)
    })

    it('answers 404 for an unknown user', async () => {
      const res = await rotate(randomUUID())
      expect(res.statusCode).toBe(404)
      errorOf(res)
    })
  })

  describe('POST /v1/users/{id}/access_key', () => {
    it('returns a new access/secret key pair on every call', async () => {
      const u = await newUser()
      const first = await t.api.post(`/v1/users/${u.id}/access_key`, { auth: admin })
      expect(first.statusCode).toBe(200)
      const a = first.json().user
      expect(a.id).toBe(u.id)
      expect(typeof a.access_key).toBe('string')
      expect(typeof a.secret_key).toBe('string')
      expect(a.access_key).not.toBe(a.secret_key)
      const second = await t.api.post(`/v1/users/${u.id}/access_key`, { auth: adminToken })
      expect(second.statusCode).toBe(200)
      const b = second.json().user
      expect(b.id).toBe(u.id)
      expect(b.access_key).not.toBe(a.access_key)
      expect(b.secret_key).not.toBe(a.secret_key)
      // The pair cannot be shown again.
      const read = await readUser(u.id)
      expect(read.body).not.toContain(b.access_key)
      expect(read.body).not.toContain(b.secret_key)
      expectNoSecrets(read, PASSWORD, NEW_PASSWORD)
      // The user's other credentials are untouched.
      await expectAlive(u.apiKey, u.id)
    })

    it('answers 404 for an unknown user and 401 to a bad key', async () => {
      const missing = await t.api.post(`/v1/users/${randomUUID()}/access_key`, { auth: admin })
      expect(missing.statusCode).toBe(404)
      errorOf(missing)
      const u = await newUser()
      const bad = await t.api.post(`/v1/users/${u.id}/access_key`, { auth: 'no-such-key' })
      expect(bad.statusCode).toBe(401)
    })
  })
})
