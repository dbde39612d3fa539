import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp, unb64 } from '../helpers/app.js'
import { expectNoSecrets } from '../helpers/no-secrets.js'

const HOUR = 60 * 60 * 1000
const PASSWORD = 'first password 1'
const NEW_PASSWORD = 'second password 2'

describe('PUT /v1/users/{id}', () => {
  const clock = new ManualClock()
  let t: TestApp
  let admin: string
  /** A group that lets its members read themselves, so a live credential can be told apart. */
  let selfRead: string
  const uniq = () => `u-${Math.random().toString(36).slice(2, 10)}`

  beforeAll(async () => {
    t = await buildTestApp({ clock })
    admin = t.admin.api_key
    const g = await t.api.post('/v1/groups', {
      auth: admin,
      form: {
        name: 'self-read',
        policy: b64([{ Resources: ['User::$[id=self.id]'], Activities: 'R' }]),
      },
    })
    selfRead = g.json().group.id
  })
  afterAll(() => t.close())

  const put = (id: string, form: Record<string, string>, auth = admin, query = '') =>
    t.api.put(`/v1/users/${id}${query}`, { auth, form })
  const read = async (id: string) => {
    const res = await t.api.get(`/v1/users/${id}?full=true`, { auth: admin })
    expect(res.statusCode).toBe(200)
    return res.json().user as {
      id: string
      username: string
      status: string
      attributes: string
      group_ids: string[]
    }
  }
  const me = (credential: string) => t.api.get('/v1/auth/me', { auth: credential })
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
  const login = (username: string, password: string) =>
    t.api.post('/v1/auth/login', {
      form: { account_id: t.admin.account_id, username, password },
    })
  /** A user with a password, attributes and a group; returns its credentials. */
  const newUser = async (form: Record<string, string> = {}) => {
    const username = uniq()
    const res = await t.api.post('/v1/users', {
      auth: admin,
      form: {
        username,
        password: PASSWORD,
        attributes: b64({ keep: 'me' }),
        group_ids: selfRead,
        ...form,
      },
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
  const newGroup = async () => {
    const res = await t.api.post('/v1/groups', {
      auth: admin,
      form: { name: `g-${uniq()}`, policy: b64([]) },
    })
    return res.json().group.id as string
  }

  it('overwrites only the given fields', async () => {
    const u = await newUser()
    const attrs = await put(u.id, { attributes: b64({ replaced: true }) })
    expect(attrs.statusCode).toBe(200)
    expect(attrs.json().user).toMatchObject({ id: u.id, user_id: u.id, username: u.username })
    expect(attrs.json().user).not.toHaveProperty('attributes')
    expect(attrs.json().user).not.toHaveProperty('access_token')
    expectNoSecrets(attrs, PASSWORD, NEW_PASSWORD)
    let now = await read(u.id)
    expect(unb64(now.attributes)).toEqual({ replaced: true })
    expect(now.status).toBe('ACTIVATED')

    const renamed = `${u.username}-x`
    const name = await put(u.id, { username: renamed }, admin, '?full=true')
    expect(name.statusCode).toBe(200)
    expect(name.json().user.username).toBe(renamed)
    expect(unb64(name.json().user.attributes)).toEqual({ replaced: true })
    now = await read(u.id)
    expect(now.username).toBe(renamed)
    expect(unb64(now.attributes)).toEqual({ replaced: true })
    // The password was not touched.
    expect((await login(renamed, PASSWORD)).statusCode).toBe(200)
    // Credentials survive an update.
    await expectAlive(u.apiKey, u.id)
    await expectAlive(u.accessToken, u.id)
  })

  it('accepts multipart and query-string bodies, and attributes set to null', async () => {
    const u = await newUser()
    const multi = await t.api.put(`/v1/users/${u.id}`, {
      auth: admin,
      multipart: { attributes: b64({ via: 'multipart' }) },
    })
    expect(multi.statusCode).toBe(200)
    expect(unb64((await read(u.id)).attributes)).toEqual({ via: 'multipart' })
    const q = new URLSearchParams({ attributes: b64({ via: 'query' }) })
    const query = await t.api.put(`/v1/users/${u.id}?${q}`, { auth: admin })
    expect(query.statusCode).toBe(200)
    expect(unb64((await read(u.id)).attributes)).toEqual({ via: 'query' })
    expect((await put(u.id, { attributes: b64(null) })).statusCode).toBe(200)
    expect(unb64((await read(u.id)).attributes)).toBeNull()
  })

  it('changes the username, refusing one held by an ACTIVATED or LOCKED user', async () => {
    const a = await newUser()
    const b = await newUser()
    const locked = await newUser({ status: 'LOCKED' })
    for (const username of [b.username, locked.username]) {
      const res = await put(a.id, { username })
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toContain('username')
    }
    expect((await read(a.id)).username).toBe(a.username)
    const empty = await put(a.id, { username: '' })
    expect(empty.statusCode).toBe(400)
    expect(errorOf(empty).message).toContain('username')
    // A PENDING user does not reserve its name.
    const pending = await newUser({ status: 'PENDING' })
    const res = await put(a.id, { username: pending.username })
    expect(res.statusCode).toBe(200)
    expect(res.json().user.username).toBe(pending.username)
  })

  it('never lets a PENDING user take a live name by changing status', async () => {
    const live = await newUser()
    const pending = await newUser({ status: 'PENDING' })
    const renamed = await put(pending.id, { username: live.username })
    expect(renamed.statusCode).toBe(200)
    for (const status of ['ACTIVATED', 'LOCKED']) {
      const res = await put(pending.id, { status })
      // Refused either as a username conflict or (should PENDING become final) as a transition.
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toMatch(/username|status/)
    }
    expect((await read(pending.id)).status).toBe('PENDING')
    const all = await t.api.get('/v1/users?status=ACTIVATED,LOCKED', { auth: admin })
    const named = all.json().users.filter((u: { username: string }) => u.username === live.username)
    expect(named).toHaveLength(1)
  })

  it('changes the password: the new one logs in, the old one no longer does', async () => {
    const u = await newUser()
    const short = await put(u.id, { password: 'short' })
    expect(short.statusCode).toBe(400)
    expect(errorOf(short).message).toContain('password')
    const res = await put(u.id, { password: NEW_PASSWORD })
    expect(res.statusCode).toBe(200)
    expectNoSecrets(res, PASSWORD, NEW_PASSWORD)
    const ok = await login(u.username, NEW_PASSWORD)
    expect(ok.statusCode).toBe(200)
    expect(ok.json().user.id).toBe(u.id)
    expect((await me(ok.json().user.access_token)).statusCode).toBe(200)
    expect((await login(u.username, PASSWORD)).statusCode).toBe(401)
  })

  it('access_token=1 vends a new working token', async () => {
    const u = await newUser()
    const res = await put(u.id, { access_token: '1' })
    expect(res.statusCode).toBe(200)
    const token = res.json().user.access_token
    expect(typeof token).toBe('string')
    expect(token).not.toBe(u.accessToken)
    const who = await me(token)
    expect(who.statusCode).toBe(200)
    expect(who.json().user.id).toBe(u.id)
    await expectAlive(token, u.id)
    // The earlier token still works too.
    await expectAlive(u.accessToken, u.id)
  })

  it('access_token_not_valid_after bounds the vended token; a past one is refused', async () => {
    const u = await newUser()
    const past = await put(u.id, {
      access_token: 'yes',
      access_token_not_valid_after: new Date(clock.now().getTime() - 1000).toISOString(),
    })
    expect(past.statusCode).toBe(400)
    expect(errorOf(past).message).toContain('access_token_not_valid_after')
    const res = await put(u.id, {
      access_token: 'yes',
      access_token_not_valid_after: new Date(clock.now().getTime() + HOUR).toISOString(),
    })
    expect(res.statusCode).toBe(200)
    const token = res.json().user.access_token
    await expectAlive(token, u.id)
    clock.advance(HOUR + 1000)
    await expectDead(token, u.id)
    await expectAlive(u.apiKey, u.id)
  })

  it('ACTIVATED → LOCKED stops every credential; LOCKED → ACTIVATED restores them', async () => {
    const u = await newUser()
    const locked = await put(u.id, { status: 'LOCKED' })
    expect(locked.statusCode).toBe(200)
    expect(locked.json().user.status).toBe('LOCKED')
    for (const credential of [u.apiKey, u.accessToken]) await expectDead(credential, u.id)
    expect((await login(u.username, PASSWORD)).statusCode).toBe(401)

    const back = await put(u.id, { status: 'ACTIVATED' })
    expect(back.statusCode).toBe(200)
    expect(back.json().user.status).toBe('ACTIVATED')
    for (const credential of [u.apiKey, u.accessToken]) await expectAlive(credential, u.id)
    expect((await login(u.username, PASSWORD)).statusCode).toBe(200)
  })

  it('a user created LOCKED holds credentials that work only once ACTIVATED', async () => {
    const u = await newUser({ status: 'LOCKED' })
    await expectDead(u.apiKey, u.id)
    expect((await login(u.username, PASSWORD)).statusCode).toBe(401)
    expect((await put(u.id, { status: 'ACTIVATED' })).statusCode).toBe(200)
    await expectAlive(u.apiKey, u.id)
    await expectAlive(u.accessToken, u.id)
  })

  it('→ DEACTIVATED kills tokens, leaves groups and frees the username, for good', async () => {
    const g = await newGroup()
    const u = await newUser({ group_ids: `${g},${selfRead}` })
    await expectAlive(u.accessToken, u.id)
    const res = await put(u.id, { status: 'DEACTIVATED' }, admin, '?full=true')
    expect(res.statusCode).toBe(200)
    expect(res.json().user.status).toBe('DEACTIVATED')
    expect(res.json().user.group_ids).toEqual([])
    const group = await t.api.get(`/v1/groups/${g}?full=true`, { auth: admin })
    expect(group.json().group.user_ids).not.toContain(u.id)
    const own = await t.api.get(`/v1/groups/${selfRead}?full=true`, { auth: admin })
    expect(own.json().group.user_ids).not.toContain(u.id)

    // Tokens are gone, not merely suspended: they stay dead whatever happens next.
    const again = await put(u.id, { status: 'ACTIVATED' })
    expect(again.statusCode).toBe(400)
    expect(errorOf(again).message).toContain('status')
    for (const status of ['LOCKED', 'PENDING']) {
      expect((await put(u.id, { status })).statusCode).toBe(400)
    }
    expect((await read(u.id)).status).toBe('DEACTIVATED')
    for (const credential of [u.apiKey, u.accessToken]) await expectDead(credential, u.id)
    // No new token for a DEACTIVATED user either.
    expect((await put(u.id, { access_token: '1' })).statusCode).toBe(400)

    const reuse = await t.api.post('/v1/users', {
      auth: admin,
      form: { username: u.username, password: PASSWORD },
    })
    expect(reuse.statusCode).toBe(200)
    expect(reuse.json().user.id).not.toBe(u.id)
  })

  it('LOCKED → DEACTIVATED is allowed too', async () => {
    const u = await newUser({ status: 'LOCKED' })
    const res = await put(u.id, { status: 'DEACTIVATED' })
    expect(res.statusCode).toBe(200)
    expect(res.json().user.status).toBe('DEACTIVATED')
    expect((await put(u.id, { status: 'LOCKED' })).statusCode).toBe(400)
    expect((await read(u.id)).status).toBe('DEACTIVATED')
  })

  it('accepts PENDING (the SDK sets it)', async () => {
    const u = await newUser()
    const res = await put(u.id, { status: 'PENDING' })
    expect(res.statusCode).toBe(200)
    expect(res.json().user.status).toBe('PENDING')
    expect((await read(u.id)).status).toBe('PENDING')
  })

  it('refuses an unknown status with 400 naming status', async () => {
    const u = await newUser()
    const res = await put(u.id, { status: 'RETIRED' })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).message).toContain('status')
    expect((await read(u.id)).status).toBe('ACTIVATED')
  })

  it('refuses invalid base64 attributes with 400, changing nothing', async () => {
    const u = await newUser()
    const res = await put(u.id, { attributes: '%%%not-base64', username: `${u.username}-y` })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res).message).toContain('attributes')
    const now = await read(u.id)
    expect(now.username).toBe(u.username)
    expect(unb64(now.attributes)).toEqual({ keep: 'me' })
  })

  it('answers 404 for an unknown user, 400 for a malformed id, 401 without credentials', async () => {
    const missing = await put(randomUUID(), { attributes: b64({}) })
    expect(missing.statusCode).toBe(404)
    errorOf(missing)
    expect((await put('nope', { attributes: b64({}) })).statusCode).toBe(400)
    const u = await newUser()
    expect((await put(u.id, { attributes: b64({}) }, 'no-such-key')).statusCode).toBe(401)
  })

  it('needs U on the user (401 otherwise, nothing changed)', async () => {
    const target = await newUser()
    const reader = await createUser(t, {
      policy: [{ Resources: ['User::.*'], Activities: 'RD' }],
    })
    const denied = await put(target.id, { attributes: b64({ hacked: true }) }, reader.apiKey)
    expect(denied.statusCode).toBe(401)
    errorOf(denied)
    expect(unb64((await read(target.id)).attributes)).toEqual({ keep: 'me' })
    const updater = await createUser(t, {
      policy: [{ Resources: [`User::${target.id}`], Activities: 'U' }],
    })
    const ok = await put(target.id, { attributes: b64({ by: 'updater' }) }, updater.apiKey)
    expect(ok.statusCode).toBe(200)
    // An updater of another user may change that user's status.
    expect((await put(target.id, { status: 'LOCKED' }, updater.apiKey)).statusCode).toBe(200)
  })

  describe('a user whose only grant is User::$[id=self.id]', () => {
    let self: Awaited<ReturnType<typeof createUser>>
    beforeAll(async () => {
      self = await createUser(t, {
        password: PASSWORD,
        policy: [{ Resources: ['User::$[id=self.id]'], Activities: 'RU' }],
      })
    })

    it('can change its own attributes', async () => {
      const res = await put(self.id, { attributes: b64({ mine: 1 }) }, self.apiKey, '?full=1')
      expect(res.statusCode).toBe(200)
      expect(unb64(res.json().user.attributes)).toEqual({ mine: 1 })
      const viaToken = await put(self.id, { attributes: b64({ mine: 2 }) }, self.accessToken)
      expect(viaToken.statusCode).toBe(200)
      expect(unb64((await read(self.id)).attributes)).toEqual({ mine: 2 })
    })

    it('cannot change its own status (401, nothing changed)', async () => {
      for (const status of ['LOCKED', 'DEACTIVATED', 'ACTIVATED']) {
        const res = await put(self.id, { status, attributes: b64({ mine: 3 }) }, self.apiKey)
        expect(res.statusCode).toBe(401)
        errorOf(res)
      }
      const now = await read(self.id)
      expect(now.status).toBe('ACTIVATED')
      expect(unb64(now.attributes)).toEqual({ mine: 2 })
      expect((await me(self.apiKey)).statusCode).toBe(200)
    })

    it('cannot update another user', async () => {
      const other = await newUser()
      const res = await put(other.id, { attributes: b64({ x: 1 }) }, self.apiKey)
      expect(res.statusCode).toBe(401)
    })
  })
})

describe('PUT /v1/users/{id} with only a password grant', () => {
  let t: TestApp

  beforeAll(async () => {
    t = await buildTestApp()
  })
  afterAll(() => t.close())

  it('sets the password when it is the only field, and nothing else', async () => {
    const target = await createUser(t, { password: PASSWORD })
    const resetter = await createUser(t, {
      policy: [{ Resources: [`User::${target.id}::Password`], Activities: 'U' }],
    })
    const ok = await t.api.put(`/v1/users/${target.id}`, {
      auth: resetter.apiKey,
      multipart: { password: NEW_PASSWORD },
    })
    expect(ok.statusCode).toBe(200)
    const login = await t.api.post('/v1/auth/login', {
      form: { account_id: t.admin.account_id, username: target.username, password: NEW_PASSWORD },
    })
    expect(login.statusCode).toBe(200)
    const forms: Record<string, string>[] = [
      { password: PASSWORD, username: 'renamed' },
      { password: PASSWORD, status: 'LOCKED' },
      { username: 'renamed' },
    ]
    for (const form of forms) {
      const res = await t.api.put(`/v1/users/${target.id}`, { auth: resetter.apiKey, form })
      expect(res.statusCode).toBe(401)
      expect(errorOf(res).code).toBe('PERMISSION_DENIED')
    }
    const other = await createUser(t, { password: PASSWORD })
    const denied = await t.api.put(`/v1/users/${other.id}`, {
      auth: resetter.apiKey,
      form: { password: NEW_PASSWORD },
    })
    expect(denied.statusCode).toBe(401)
  })
})
