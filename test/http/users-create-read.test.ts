import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import type { PolicyStatement } from '../../src/policy/index.js'
import {
  type Admin,
  b64,
  buildTestApp,
  createUser,
  errorOf,
  type TestApp,
  unb64,
} from '../helpers/app.js'
import { expectNoSecrets } from '../helpers/no-secrets.js'

const HOUR = 60 * 60 * 1000
const PASSWORD = 'correct horse battery'
const ALL_STATUSES = 'ACTIVATED,PENDING,LOCKED,DEACTIVATED'

/** Ruby's `Base64.encode64`: a newline after every 60 characters and at the end. */
function rubyB64(value: unknown): string {
  const flat = b64(value)
  return `${flat.match(/.{1,60}/g)?.join('\n')}\n`
}

describe('users: create and read', () => {
  const clock = new ManualClock()
  let t: TestApp
  let admin: string
  const uniq = () => `u-${Math.random().toString(36).slice(2, 10)}`

  beforeAll(async () => {
    t = await buildTestApp({ clock })
    admin = t.admin.api_key
  })
  afterAll(() => t.close())

  const create = (form: Record<string, string>, auth = admin, query = '') =>
    t.api.post(`/v1/users${query}`, { auth, form })
  const me = (credential: string) => t.api.get('/v1/auth/me', { auth: credential })
  const login = (username: string, password: string, accountId = t.admin.account_id) =>
    t.api.post('/v1/auth/login', { form: { account_id: accountId, username, password } })
  const newGroup = async (policy: PolicyStatement[] = []) => {
    const res = await t.api.post('/v1/groups', {
      auth: admin,
      form: { name: `g-${uniq()}`, policy: b64(policy) },
    })
    expect(res.statusCode).toBe(200)
    return res.json().group.id as string
  }
  /** Every user of the admin's account with this name, whatever its status. */
  const usersNamed = async (username: string) => {
    const res = await t.api.get(`/v1/users?status=${ALL_STATUSES}`, { auth: admin })
    expect(res.statusCode).toBe(200)
    return (res.json().users as { username: string; status: string }[]).filter(
      (u) => u.username === username,
    )
  }

  describe('POST /v1/users', () => {
    it('creates from a urlencoded form with id, user_id, account_id, api_key, access_token', async () => {
      const username = uniq()
      const res = await create({ username, password: PASSWORD })
      expect(res.statusCode).toBe(200)
      const body = res.json()
      expect(body.result).toBe('success')
      expect(typeof body.transaction_id).toBe('string')
      const user = body.user
      expect(user).toMatchObject({
        username,
        status: 'ACTIVATED',
        account_id: t.admin.account_id,
        mfa_enrolled: false,
      })
      expect(user.id).toMatch(/^[0-9a-f-]{36}$/)
      expect(user.user_id).toBe(user.id)
      expect(typeof user.api_key).toBe('string')
      expect(typeof user.access_token).toBe('string')
      expect(user.api_key).not.toBe(user.access_token)
      expect(user).not.toHaveProperty('attributes')
      expect(user).not.toHaveProperty('group_ids')
      expectNoSecrets(res, PASSWORD)
    })

    it('accepts a multipart body, as the official SDK sends it', async () => {
      const username = uniq()
      const res = await t.api.post('/v1/users', {
        auth: admin,
        multipart: { username, password: PASSWORD, attributes: b64({ via: 'multipart' }) },
      })
      expect(res.statusCode).toBe(200)
      const id = res.json().user.id
      const read = await t.api.get(`/v2/users/${id}?full=true`, { auth: admin })
      expect(read.json().users[0]).toMatchObject({ username, attributes: { via: 'multipart' } })
      expect((await login(username, PASSWORD)).statusCode).toBe(200)
    })

    it('accepts query-string parameters on the POST with an empty body (Ruby client)', async () => {
      const username = uniq()
      const q = new URLSearchParams({
        username,
        password: PASSWORD,
        attributes: rubyB64({ via: 'query' }),
      })
      const res = await t.api.post(`/v1/users?${q}`, { auth: admin })
      expect(res.statusCode).toBe(200)
      expect(res.json().user.username).toBe(username)
      const read = await t.api.get(`/v2/users/${res.json().user.id}?full=true`, { auth: admin })
      expect(read.json().users[0].attributes).toEqual({ via: 'query' })
    })

    it('creates PENDING and LOCKED users when asked, both with credentials', async () => {
      for (const status of ['PENDING', 'LOCKED', 'ACTIVATED']) {
        const res = await create({ username: uniq(), status })
        expect(res.statusCode).toBe(200)
        expect(res.json().user.status).toBe(status)
        expect(typeof res.json().user.api_key).toBe('string')
        expect(typeof res.json().user.access_token).toBe('string')
      }
    })

    it('refuses an unknown or DEACTIVATED status with 400 naming status', async () => {
      for (const status of ['BOGUS', 'DEACTIVATED']) {
        const username = uniq()
        const res = await create({ username, status })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toContain('status')
        expect(await usersNamed(username)).toEqual([])
      }
    })

    it('requires a username', async () => {
      const forms: Record<string, string>[] = [
        { password: PASSWORD },
        { username: '', password: PASSWORD },
        { username: '   ', password: PASSWORD },
      ]
      for (const form of forms) {
        const res = await create(form)
        expect(res.statusCode).toBe(400)
        const error = errorOf(res)
        expect(error.message).toContain('username')
        expect(typeof error.code).toBe('string')
        expect(typeof error.type).toBe('string')
      }
    })

    it('refuses a username held by an ACTIVATED or LOCKED user', async () => {
      const active = uniq()
      expect((await create({ username: active })).statusCode).toBe(200)
      const dup = await create({ username: active })
      expect(dup.statusCode).toBe(400)
      expect(errorOf(dup).message).toContain('username')
      expect((await create({ username: active, status: 'LOCKED' })).statusCode).toBe(400)

      const locked = uniq()
      expect((await create({ username: locked, status: 'LOCKED' })).statusCode).toBe(200)
      const dupLocked = await create({ username: locked })
      expect(dupLocked.statusCode).toBe(400)
      expect(errorOf(dupLocked).message).toContain('username')
      expect(await usersNamed(locked)).toHaveLength(1)
    })

    it("reuses a PENDING user's name and a deleted user's name", async () => {
      const pending = uniq()
      expect((await create({ username: pending, status: 'PENDING' })).statusCode).toBe(200)
      const taken = await create({ username: pending })
      expect(taken.statusCode).toBe(200)
      expect(taken.json().user.status).toBe('ACTIVATED')

      const gone = uniq()
      const first = await create({ username: gone })
      const del = await t.api.delete(`/v1/users/${first.json().user.id}`, { auth: admin })
      expect(del.statusCode).toBe(200)
      const again = await create({ username: gone })
      expect(again.statusCode).toBe(200)
      expect(again.json().user.id).not.toBe(first.json().user.id)
    })

    it('refuses a password shorter than 8 characters', async () => {
      const username = uniq()
      const res = await create({ username, password: 'short12' })
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toContain('password')
      expect(await usersNamed(username)).toEqual([])
      expect((await create({ username, password: '1234567x' })).statusCode).toBe(200)
    })

    it('a user without a password cannot log in, but its API key works', async () => {
      const username = uniq()
      const res = await create({ username })
      expect(res.statusCode).toBe(200)
      const login1 = await login(username, 'anything-at-all')
      expect(login1.statusCode).toBe(401)
      errorOf(login1)
      const who = await me(res.json().user.api_key)
      expect(who.statusCode).toBe(200)
      expect(who.json().user.username).toBe(username)
    })

    it('the vended API key and access token both work as Basic user names', async () => {
      const res = await create({ username: uniq(), password: PASSWORD })
      const { id, api_key, access_token } = res.json().user
      for (const credential of [api_key, access_token]) {
        const who = await me(credential)
        expect(who.statusCode).toBe(200)
        expect(who.json().user.id).toBe(id)
      }
    })

    it('stores base64 attributes with embedded newlines (Ruby encoder) and reads them back', async () => {
      const attributes = {
        name: 'Ada Lovelace',
        note: 'x'.repeat(150),
        nested: { list: [1, 2, 3], flag: true, unicode: 'Zoë ✓' },
      }
      const encoded = rubyB64(attributes)
      expect(encoded.split('\n').length).toBeGreaterThan(3)
      const res = await create({ username: uniq(), attributes: encoded })
      expect(res.statusCode).toBe(200)
      const id = res.json().user.id
      const v1 = await t.api.get(`/v1/users/${id}?full=true`, { auth: admin })
      expect(unb64(v1.json().user.attributes)).toEqual(attributes)
      const v2 = await t.api.get(`/v2/users/${id}?full=true`, { auth: admin })
      expect(v2.json().users[0].attributes).toEqual(attributes)
    })

    it('a user created without attributes reads back {} (base64 in v1, JSON in v2)', async () => {
      const res = await create({ username: uniq() })
      const id = res.json().user.id
      const v1 = await t.api.get(`/v1/users/${id}?full=true`, { auth: admin })
      expect(v1.json().user.attributes).toBe(b64({}))
      expect(unb64(v1.json().user.attributes)).toEqual({})
      const v2 = await t.api.get(`/v2/users/${id}?full=true`, { auth: admin })
      expect(v2.json().users[0].attributes).toEqual({})
    })

    it('refuses invalid base64 attributes with 400 naming attributes, creating nothing', async () => {
      for (const attributes of ['not base64 at all!', b64('x').slice(0, 3), 'aGVsbG8=']) {
        const username = uniq()
        const res = await create({ username, attributes })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toContain('attributes')
        expect(await usersNamed(username)).toEqual([])
      }
    })

    it('shows attributes and group_ids only with full=true, 1 or 01', async () => {
      for (const full of ['true', '1', '01']) {
        const res = await create(
          { username: uniq(), attributes: b64({ a: 1 }) },
          admin,
          `?full=${full}`,
        )
        expect(res.statusCode).toBe(200)
        expect(unb64(res.json().user.attributes)).toEqual({ a: 1 })
        expect(res.json().user.group_ids).toEqual([])
      }
      for (const full of ['false', '0']) {
        const res = await create(
          { username: uniq(), attributes: b64({ a: 1 }) },
          admin,
          `?full=${full}`,
        )
        expect(res.statusCode).toBe(200)
        expect(res.json().user).not.toHaveProperty('attributes')
        expect(res.json().user).not.toHaveProperty('group_ids')
      }
    })

    it('group_ids puts the user in every listed group', async () => {
      const g1 = await newGroup()
      const g2 = await newGroup()
      const res = await create({ username: uniq(), group_ids: `${g1},${g2}` }, admin, '?full=true')
      expect(res.statusCode).toBe(200)
      const id = res.json().user.id
      expect([...res.json().user.group_ids].sort()).toEqual([g1, g2].sort())
      for (const g of [g1, g2]) {
        const group = await t.api.get(`/v1/groups/${g}?full=true`, { auth: admin })
        expect(group.json().group.user_ids).toContain(id)
      }
      const read = await t.api.get(`/v2/users/${id}?full=true`, { auth: admin })
      expect([...read.json().users[0].group_ids].sort()).toEqual([g1, g2].sort())
    })

    it('accepts an empty group_ids (the SDK sends "" for [])', async () => {
      const res = await create({ username: uniq(), group_ids: '' }, admin, '?full=true')
      expect(res.statusCode).toBe(200)
      expect(res.json().user.group_ids).toEqual([])
    })

    it('refuses an unknown or malformed group id with 400, creating nothing', async () => {
      const g = await newGroup()
      for (const group_ids of [`${g},${randomUUID()}`, 'not-a-uuid']) {
        const username = uniq()
        const res = await create({ username, group_ids })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toContain('group_ids')
        expect(await usersNamed(username)).toEqual([])
      }
      const group = await t.api.get(`/v1/groups/${g}?full=true`, { auth: admin })
      expect(group.json().group.user_ids).toEqual([])
    })

    describe('group_ids permission', () => {
      let g: string
      beforeAll(async () => {
        g = await newGroup()
      })
      const callerWith = (extra: PolicyStatement[]) =>
        createUser(t, { policy: [{ Resources: ['User::'], Activities: 'C' }, ...extra] })

      it('C on User:: alone creates users but cannot put them in a group (401, nothing created)', async () => {
        const caller = await callerWith([])
        expect((await create({ username: uniq() }, caller.apiKey)).statusCode).toBe(200)
        const username = uniq()
        const res = await create({ username, group_ids: g }, caller.apiKey)
        expect(res.statusCode).toBe(401)
        errorOf(res)
        expect(await usersNamed(username)).toEqual([])
        const group = await t.api.get(`/v1/groups/${g}?full=true`, { auth: admin })
        expect(group.json().group.user_ids).toEqual([])
      })

      it('C on a group grant elsewhere does not help', async () => {
        const other = await newGroup()
        const caller = await callerWith([
          { Resources: [`Group::${other}::GroupMembership::.*`], Activities: 'C' },
          { Resources: [`Group::${other}`], Activities: 'U' },
        ])
        const res = await create({ username: uniq(), group_ids: g }, caller.apiKey)
        expect(res.statusCode).toBe(401)
      })

      it('C on Group::G::GroupMembership::.* is enough', async () => {
        const caller = await callerWith([
          { Resources: [`Group::${g}::GroupMembership::.*`], Activities: 'C' },
        ])
        const res = await create({ username: uniq(), group_ids: g }, caller.apiKey)
        expect(res.statusCode).toBe(200)
        const group = await t.api.get(`/v1/groups/${g}?full=true`, { auth: admin })
        expect(group.json().group.user_ids).toContain(res.json().user.id)
      })

      it('U on Group::G is enough', async () => {
        const caller = await callerWith([{ Resources: [`Group::${g}`], Activities: 'U' }])
        const res = await create({ username: uniq(), group_ids: g }, caller.apiKey)
        expect(res.statusCode).toBe(200)
        const group = await t.api.get(`/v1/groups/${g}?full=true`, { auth: admin })
        expect(group.json().group.user_ids).toContain(res.json().user.id)
      })

      it('a caller without C on User:: gets 401', async () => {
        const caller = await createUser(t, {
          policy: [{ Resources: ['User::.*'], Activities: 'RUD' }],
        })
        const username = uniq()
        const res = await create({ username }, caller.apiKey)
        expect(res.statusCode).toBe(401)
        expect(await usersNamed(username)).toEqual([])
      })
    })

    it('refuses an access_token_not_valid_after in the past or not a time', async () => {
      for (const when of [new Date(clock.now().getTime() - HOUR).toISOString(), 'tomorrow']) {
        const username = uniq()
        const res = await create({ username, access_token_not_valid_after: when })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toContain('access_token_not_valid_after')
        expect(await usersNamed(username)).toEqual([])
      }
    })

    it('a future access_token_not_valid_after bounds the vended token', async () => {
      const selfRead = await newGroup([{ Resources: ['User::$[id=self.id]'], Activities: 'R' }])
      const expiry = new Date(clock.now().getTime() + 2 * HOUR).toISOString()
      const res = await create({
        username: uniq(),
        access_token_not_valid_after: expiry,
        group_ids: selfRead,
      })
      expect(res.statusCode).toBe(200)
      const { id, access_token, api_key } = res.json().user
      const readSelf = (credential: string) => t.api.get(`/v1/users/${id}`, { auth: credential })
      expect((await readSelf(access_token)).statusCode).toBe(200)
      clock.advance(HOUR)
      expect((await readSelf(access_token)).statusCode).toBe(200)
      clock.advance(HOUR + 1000)
      const late = await readSelf(access_token)
      expect(late.statusCode).toBe(401)
      errorOf(late)
      // /v1/auth/me answers an invalid credential with 400 (spec).
      expect((await me(access_token)).statusCode).toBe(400)
      // The API key has no expiry.
      expect((await readSelf(api_key)).statusCode).toBe(200)
    })

    it('refuses a missing or unknown credential with 401', async () => {
      const none = await t.api.post('/v1/users', { form: { username: uniq() } })
      expect(none.statusCode).toBe(401)
      const bad = await create({ username: uniq() }, 'no-such-key')
      expect(bad.statusCode).toBe(401)
      errorOf(bad)
    })
  })

  describe('GET /v2/users/{ids}', () => {
    let u1: { id: string; username: string }
    let u2: { id: string; username: string }
    let u3: { id: string; username: string }
    beforeAll(async () => {
      const make = async (attributes: unknown) => {
        const username = uniq()
        const res = await create({ username, password: PASSWORD, attributes: b64(attributes) })
        return { id: res.json().user.id as string, username }
      }
      u1 = await make({ n: 1 })
      u2 = await make({ n: 2 })
      u3 = await make({ n: 3 })
    })

    it('reads several users in the order requested', async () => {
      for (const order of [
        [u2, u1, u3],
        [u3, u2, u1],
      ]) {
        const res = await t.api.get(`/v2/users/${order.map((u) => u.id).join(',')}`, {
          auth: admin,
        })
        expect(res.statusCode).toBe(200)
        const users = res.json().users
        expect(users.map((u: { id: string }) => u.id)).toEqual(order.map((u) => u.id))
        expect(users.map((u: { username: string }) => u.username)).toEqual(
          order.map((u) => u.username),
        )
        for (const u of users) {
          expect(u.user_id).toBe(u.id)
          expect(u).not.toHaveProperty('attributes')
          expect(u).not.toHaveProperty('group_ids')
        }
        expectNoSecrets(res, PASSWORD)
      }
    })

    it('full=true returns attributes as JSON, not base64, and group_ids', async () => {
      const res = await t.api.get(`/v2/users/${u1.id},${u2.id}?full=true`, { auth: admin })
      expect(res.statusCode).toBe(200)
      const [a, b] = res.json().users
      expect(a.attributes).toEqual({ n: 1 })
      expect(b.attributes).toEqual({ n: 2 })
      expect(a.group_ids).toEqual([])
      expectNoSecrets(res, PASSWORD)
    })

    it('refuses more than 100 ids with 400', async () => {
      const ids = Array.from({ length: 101 }, () => randomUUID())
      const res = await t.api.get(`/v2/users/${ids.join(',')}`, { auth: admin })
      expect(res.statusCode).toBe(400)
      errorOf(res)
      const hundred = [u1.id, ...ids.slice(0, 99)]
      // 100 ids is within the limit: the missing ones make it a 404, not a 400.
      expect((await t.api.get(`/v2/users/${hundred.join(',')}`, { auth: admin })).statusCode).toBe(
        404,
      )
    })

    it('refuses an id that is not a UUID with 400', async () => {
      const res = await t.api.get(`/v2/users/${u1.id},not-a-uuid`, { auth: admin })
      expect(res.statusCode).toBe(400)
      errorOf(res)
    })

    it('answers 404 when any id is missing', async () => {
      const res = await t.api.get(`/v2/users/${u1.id},${randomUUID()}`, { auth: admin })
      expect(res.statusCode).toBe(404)
      expect(res.json()).not.toHaveProperty('users')
      errorOf(res)
    })

    it('answers 404 when any id is not readable by the caller', async () => {
      const caller = await createUser(t, {
        policy: [{ Resources: [`User::${u1.id}`], Activities: 'R' }],
      })
      const ok = await t.api.get(`/v2/users/${u1.id}`, { auth: caller.apiKey })
      expect(ok.statusCode).toBe(200)
      expect(ok.json().users[0].id).toBe(u1.id)
      const mixed = await t.api.get(`/v2/users/${u1.id},${u2.id}`, { auth: caller.apiKey })
      expect(mixed.statusCode).toBe(404)
      errorOf(mixed)
      const other = await t.api.get(`/v2/users/${u2.id}`, { auth: caller.apiKey })
      expect(other.statusCode).toBe(404)
    })

    it('answers 401 to a user in no group', async () => {
      const loner = await createUser(t)
      const res = await t.api.get(`/v2/users/${loner.id}`, { auth: loner.apiKey })
      expect(res.statusCode).toBe(401)
      errorOf(res)
    })

    it('answers 401 to a bad key', async () => {
      const res = await t.api.get(`/v2/users/${u1.id}`, { auth: 'no-such-key' })
      expect(res.statusCode).toBe(401)
    })
  })

  describe('GET /v1/users/{id}', () => {
    it('reads one user, with base64 attributes and group_ids when full', async () => {
      const g = await newGroup()
      const username = uniq()
      const created = await create({
        username,
        password: PASSWORD,
        attributes: b64({ k: 'v' }),
        group_ids: g,
      })
      const id = created.json().user.id
      const plain = await t.api.get(`/v1/users/${id}`, { auth: admin })
      expect(plain.statusCode).toBe(200)
      expect(plain.json().user).toMatchObject({ id, user_id: id, username, status: 'ACTIVATED' })
      expect(plain.json().user).not.toHaveProperty('attributes')
      expect(plain.json().user).not.toHaveProperty('api_key')
      expect(plain.json().user).not.toHaveProperty('access_token')
      const full = await t.api.get(`/v1/users/${id}?full=true`, { auth: admin })
      expect(unb64(full.json().user.attributes)).toEqual({ k: 'v' })
      expect(full.json().user.group_ids).toEqual([g])
      expectNoSecrets(full, PASSWORD)
    })

    it('answers 404 for an unknown user and 400 for a malformed id', async () => {
      const missing = await t.api.get(`/v1/users/${randomUUID()}`, { auth: admin })
      expect(missing.statusCode).toBe(404)
      errorOf(missing)
      const bad = await t.api.get('/v1/users/not-a-uuid', { auth: admin })
      expect(bad.statusCode).toBe(400)
      errorOf(bad)
    })

    it('answers 401 for a bad key and for a caller without R on the user', async () => {
      const target = await createUser(t)
      const badKey = await t.api.get(`/v1/users/${target.id}`, { auth: 'no-such-key' })
      expect(badKey.statusCode).toBe(401)
      errorOf(badKey)
      const caller = await createUser(t, {
        policy: [
          { Resources: ['User::'], Activities: 'C' },
          { Resources: [`User::${target.id}`], Activities: 'UD' },
        ],
      })
      const denied = await t.api.get(`/v1/users/${target.id}`, { auth: caller.apiKey })
      expect(denied.statusCode).toBe(401)
      errorOf(denied)
      const reader = await createUser(t, {
        policy: [{ Resources: [`User::${target.id}`], Activities: 'R' }],
      })
      expect((await t.api.get(`/v1/users/${target.id}`, { auth: reader.apiKey })).statusCode).toBe(
        200,
      )
    })
  })

  describe('GET /v1/users', () => {
    let acct: Admin
    const names: Record<string, string> = {}
    const ids: Record<string, string> = {}
    let group: string
    const list = async (query: string, auth = acct.api_key) => {
      const res = await t.api.get(`/v1/users${query}`, { auth })
      return res
    }
    const namesOf = (res: LightMyRequestResponse) =>
      (res.json().users as { username: string }[]).map((u) => u.username).sort()

    beforeAll(async () => {
      acct = await t.newAccount()
      const g = await t.api.post('/v1/groups', {
        auth: acct.api_key,
        form: { name: 'listed', policy: b64([]) },
      })
      group = g.json().group.id
      const make = async (key: string, form: Record<string, string>) => {
        const username = `${key}-${uniq()}`
        const res = await t.api.post('/v1/users', {
          auth: acct.api_key,
          form: { username, ...form },
        })
        expect(res.statusCode).toBe(200)
        names[key] = username
        ids[key] = res.json().user.id
      }
      await make('active', { attributes: b64({ who: 'active' }), group_ids: group })
      await make('pending', { status: 'PENDING' })
      await make('locked', { status: 'LOCKED' })
      await make('gone', {})
      const del = await t.api.delete(`/v1/users/${ids.gone}`, { auth: acct.api_key })
      expect(del.statusCode).toBe(200)
    })

    it('lists only ACTIVATED users by default, without attributes', async () => {
      const res = await list('')
      expect(res.statusCode).toBe(200)
      expect(namesOf(res)).toEqual([acct.username, names.active].sort())
      for (const u of res.json().users) {
        expect(u.status).toBe('ACTIVATED')
        expect(u).not.toHaveProperty('attributes')
        expect(u).not.toHaveProperty('group_ids')
      }
      expectNoSecrets(res, PASSWORD)
    })

    it('never lists users of another account', async () => {
      const res = await list(`?status=${ALL_STATUSES}`)
      const accounts = new Set(res.json().users.map((u: { account_id: string }) => u.account_id))
      expect([...accounts]).toEqual([acct.account_id])
    })

    it('filters by status', async () => {
      expect(namesOf(await list('?status=PENDING'))).toEqual([names.pending])
      const lockedGone = await list('?status=LOCKED,DEACTIVATED')
      expect(lockedGone.statusCode).toBe(200)
      expect(namesOf(lockedGone)).toEqual([names.locked, names.gone].sort())
      const statuses = lockedGone.json().users.map((u: { status: string }) => u.status)
      expect(statuses.sort()).toEqual(['DEACTIVATED', 'LOCKED'])
    })

    it('takes ACTIVE as ACTIVATED (SDK doc comment)', async () => {
      expect(namesOf(await list('?status=ACTIVE'))).toEqual([acct.username, names.active].sort())
    })

    it('refuses an unknown status with 400 naming status', async () => {
      const res = await list('?status=ACTIVATED,ASLEEP')
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).message).toContain('status')
    })

    it('full=true includes base64 attributes and group_ids', async () => {
      const res = await list('?full=true')
      expect(res.statusCode).toBe(200)
      const users = res.json().users as { id: string; attributes: string; group_ids: string[] }[]
      const active = users.find((u) => u.id === ids.active)
      expect(active).toBeDefined()
      expect(unb64(active?.attributes ?? '')).toEqual({ who: 'active' })
      expect(active?.group_ids).toEqual([group])
      const adminRow = users.find((u) => u.id !== ids.active)
      expect(adminRow?.group_ids).toHaveLength(1)
      expect(typeof adminRow?.attributes).toBe('string')
      expectNoSecrets(res, PASSWORD)
    })

    it('shows only what the caller may read', async () => {
      const mk = (policy: PolicyStatement[]) =>
        createUser(t, { auth: acct.api_key, policy, password: PASSWORD })
      const self = await mk([{ Resources: ['User::', 'User::$[id=self.id]'], Activities: 'R' }])
      const mine = await list(`?status=${ALL_STATUSES}&full=true`, self.apiKey)
      expect(mine.statusCode).toBe(200)
      expect(mine.json().users.map((u: { id: string }) => u.id)).toEqual([self.id])

      const collectionOnly = await mk([{ Resources: ['User::'], Activities: 'R' }])
      const nothing = await list('', collectionOnly.apiKey)
      expect(nothing.statusCode).toBe(200)
      expect(nothing.json().users).toEqual([])

      const one = await mk([{ Resources: [`User::${ids.locked}`], Activities: 'R' }])
      expect(namesOf(await list('?status=LOCKED,ACTIVATED', one.apiKey))).toEqual([names.locked])

      const noRead = await mk([{ Resources: ['User::', 'User::.*'], Activities: 'CUD' }])
      const denied = await list('', noRead.apiKey)
      expect(denied.statusCode).toBe(401)
      errorOf(denied)
    })

    it('answers 401 to a bad key', async () => {
      expect((await list('', 'no-such-key')).statusCode).toBe(401)
    })
  })
})

describe('SDK password artifacts', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await buildTestApp()
  })
  afterAll(() => t.close())

  it('treats the literal passwords "undefined" and "null" as no password', async () => {
    for (const password of ['undefined', 'null']) {
      const username = `artifact-${password}`
      const created = await t.api.post('/v1/users', {
        auth: t.admin.api_key,
        multipart: { username, password },
      })
      expect(created.statusCode).toBe(200)
      const login = await t.api.post('/v1/auth/login', {
        form: { account_id: t.admin.account_id, username, password },
      })
      expect(login.statusCode).toBe(401)
      expect(errorOf(login).code).toBe('LOGIN_FAILED')
    }
  })
})
