import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import { type Admin, b64, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

const ALL_STATUSES = 'ACTIVATED,PENDING,LOCKED,DEACTIVATED'
const A_POLICY: PolicyStatement[] = [{ Resources: ['Group::.*'], Activities: 'R' }]

function expectNotFound(res: LightMyRequestResponse) {
  expect(res.statusCode, res.body).toBe(404)
  expect(errorOf(res).type).toBe('not_found_error')
}

describe('cross-account isolation', () => {
  let t: TestApp
  let a: Admin
  let b: Admin
  /** Account A's rows. */
  let aUser: { id: string; username: string; apiKey: string; accessToken: string }
  let aGroup: string
  let aPassword: string
  /** Account B's rows. */
  let bUser: { id: string; apiKey: string }
  let bGroup: string

  async function snapshotA() {
    const user = await t.api.get(`/v1/users/${aUser.id}?full=true`, { auth: a.api_key })
    const group = await t.api.get(`/v1/groups/${aGroup}?full=true`, { auth: a.api_key })
    const users = await t.api.get(`/v1/users?status=${ALL_STATUSES}`, { auth: a.api_key })
    const groups = await t.api.get('/v1/groups', { auth: a.api_key })
    for (const res of [user, group, users, groups]) expect(res.statusCode, res.body).toBe(200)
    return {
      user: user.json().user,
      group: group.json().group,
      users: users.json().users,
      groups: groups.json().groups,
    }
  }

  async function idsSeenBy(auth: string) {
    const users = await t.api.get(`/v1/users?status=${ALL_STATUSES}&full=true`, { auth })
    const groups = await t.api.get('/v1/groups?full=true', { auth })
    expect(users.statusCode, users.body).toBe(200)
    expect(groups.statusCode, groups.body).toBe(200)
    return {
      users: (users.json().users as Array<{ id: string; account_id: string }>).map((u) => u.id),
      accounts: (users.json().users as Array<{ account_id: string }>).map((u) => u.account_id),
      groups: (groups.json().groups as Array<{ id: string }>).map((g) => g.id),
    }
  }

  beforeAll(async () => {
    t = await buildTestApp()
    a = t.admin
    b = await t.newAccount()
    expect(b.account_id).not.toBe(a.account_id)
    aPassword = 'correct horse battery staple'
    aUser = await createUser(t, { auth: a.api_key, password: aPassword })
    const g = await t.api.post('/v1/groups', {
      auth: a.api_key,
      form: { name: 'shared-group-name', policy: b64(A_POLICY), user_ids: aUser.id },
    })
    expect(g.statusCode, g.body).toBe(200)
    aGroup = g.json().group.id
    bUser = await createUser(t, { auth: b.api_key })
    const bg = await t.api.post('/v1/groups', {
      auth: b.api_key,
      form: { name: 'b-group', user_ids: bUser.id },
    })
    expect(bg.statusCode, bg.body).toBe(200)
    bGroup = bg.json().group.id
  })
  afterAll(() => t.close())

  it("B's admin cannot read A's users or groups (404)", async () => {
    const before = await snapshotA()
    const auth = b.api_key
    expectNotFound(await t.api.get(`/v1/users/${aUser.id}`, { auth }))
    expectNotFound(await t.api.get(`/v1/users/${a.userId}?full=true`, { auth }))
    expectNotFound(await t.api.get(`/v2/users/${aUser.id}`, { auth }))
    expectNotFound(await t.api.get(`/v2/users/${bUser.id},${aUser.id}?full=true`, { auth }))
    expectNotFound(await t.api.get(`/v1/groups/${aGroup}`, { auth }))
    expectNotFound(await t.api.get(`/v1/groups/${aGroup}?full=true`, { auth }))
    expect(await snapshotA()).toEqual(before)
  })

  it("B's admin cannot update or delete A's users (404, nothing changes)", async () => {
    const before = await snapshotA()
    const auth = b.api_key
    const id = aUser.id
    expectNotFound(await t.api.put(`/v1/users/${id}`, { auth, form: { username: 'stolen' } }))
    expectNotFound(
      await t.api.put(`/v1/users/${id}`, { auth, multipart: { status: 'DEACTIVATED' } }),
    )
    expectNotFound(
      await t.api.put(`/v1/users/${id}`, {
        auth,
        form: { attributes: b64({ pwned: true }), access_token: '1' },
      }),
    )
    expectNotFound(
      await t.api.put(`/v1/users/${id}/password`, {
        auth,
        json: { password: 'attacker-chosen-password' },
      }),
    )
    expectNotFound(await t.api.post(`/v1/users/${id}/access_token`, { auth }))
    expectNotFound(await t.api.post(`/v1/users/${id}/api_key`, { auth }))
    expectNotFound(await t.api.post(`/v1/users/${id}/access_key`, { auth }))
    expectNotFound(await t.api.delete(`/v1/users/${id}`, { auth }))
    expectNotFound(await t.api.delete(`/v1/users/${a.userId}`, { auth }))

    expect(await snapshotA()).toEqual(before)
    // A's user keeps working: its credentials and password are untouched.
    const me = await t.api.get('/v1/auth/me', { auth: aUser.apiKey })
    expect(me.statusCode, me.body).toBe(200)
    expect(me.json().user).toMatchObject({ id, username: aUser.username, status: 'ACTIVATED' })
    expect((await t.api.get('/v1/auth/me', { auth: aUser.accessToken })).statusCode).toBe(200)
    const login = await t.api.post('/v1/auth/login', {
      form: { account_id: a.account_id, username: aUser.username, password: aPassword },
    })
    expect(login.statusCode, login.body).toBe(200)
  })

  it("B's admin cannot update or delete A's groups or their memberships (404)", async () => {
    const before = await snapshotA()
    const auth = b.api_key
    const g = aGroup
    expectNotFound(
      await t.api.put(`/v1/groups/${g}`, {
        auth,
        json: { name: 'stolen', policy: [], user_ids: [aUser.id], user_operation: 'REMOVE' },
      }),
    )
    expectNotFound(
      await t.api.put(`/v1/groups/${g}`, {
        auth,
        multipart: { operation: 'APPEND', user_ids: bUser.id, policy: b64([]) },
      }),
    )
    expectNotFound(
      await t.api.post(`/v1/groups/${g}/membership`, { auth, json: { user_ids: [bUser.id] } }),
    )
    expectNotFound(
      await t.api.post(`/v1/groups/${g}/membership`, { auth, json: { user_ids: [aUser.id] } }),
    )
    expectNotFound(await t.api.delete(`/v1/groups/${g}/membership/${aUser.id}`, { auth }))
    expectNotFound(await t.api.delete(`/v1/groups/${g}`, { auth }))
    expect(await snapshotA()).toEqual(before)
    // A's user still gets its group's policy.
    const read = await t.api.get(`/v1/groups/${g}`, { auth: aUser.apiKey })
    expect(read.statusCode, read.body).toBe(200)
  })

  it("B cannot add A's users to B's groups, nor B's users to A's groups", async () => {
    const before = await snapshotA()
    const auth = b.api_key

    const created = await t.api.post('/v1/groups', {
      auth,
      form: { name: `b-${randomUUID()}`, user_ids: `${aUser.id},${bUser.id}` },
    })
    expect(created.statusCode, created.body).toBe(200)
    expect(created.json().group.user_ids).toEqual([bUser.id])

    const json = await t.api.put(`/v1/groups/${bGroup}`, {
      auth,
      json: { user_ids: [aUser.id, a.userId], user_operation: 'APPEND' },
    })
    expect(json.statusCode, json.body).toBe(200)
    expect(json.json().group.user_ids).toEqual([bUser.id])

    const form = await t.api.put(`/v1/groups/${bGroup}`, {
      auth,
      form: { operation: 'APPEND', user_ids: aUser.id },
    })
    expect(form.statusCode, form.body).toBe(200)
    expect(form.json().group.user_ids).toEqual([bUser.id])

    expectNotFound(
      await t.api.post(`/v1/groups/${bGroup}/membership`, {
        auth,
        json: { user_ids: [aUser.id] },
      }),
    )
    expectNotFound(await t.api.delete(`/v1/groups/${bGroup}/membership/${aUser.id}`, { auth }))

    const withAGroup = await t.api.post('/v1/users', {
      auth,
      form: { username: `b-${randomUUID()}`, group_ids: aGroup },
    })
    expect(withAGroup.statusCode, withAGroup.body).toBe(400)
    expect(errorOf(withAGroup).message).toMatch(/group_ids/)

    const bGroupRead = await t.api.get(`/v1/groups/${bGroup}?full=true`, { auth })
    expect(bGroupRead.json().group.user_ids).toEqual([bUser.id])
    expect(await snapshotA()).toEqual(before)
  })

  it("a B policy naming A's ids reaches nothing in A", async () => {
    const before = await snapshotA()
    const caller = await createUser(t, {
      auth: b.api_key,
      policy: [
        { Resources: [`User::${aUser.id}`, `Group::${aGroup}`], Activities: 'CRUD' },
        { Resources: [`Group::${aGroup}::GroupMembership::.*`], Activities: 'CD' },
      ],
    })
    const auth = caller.apiKey
    expectNotFound(await t.api.get(`/v1/users/${aUser.id}`, { auth }))
    expectNotFound(await t.api.get(`/v2/users/${aUser.id}`, { auth }))
    expectNotFound(await t.api.put(`/v1/users/${aUser.id}`, { auth, form: { username: 'x' } }))
    expectNotFound(await t.api.delete(`/v1/users/${aUser.id}`, { auth }))
    expectNotFound(await t.api.get(`/v1/groups/${aGroup}`, { auth }))
    expectNotFound(await t.api.put(`/v1/groups/${aGroup}`, { auth, json: { name: 'x' } }))
    expectNotFound(
      await t.api.post(`/v1/groups/${aGroup}/membership`, {
        auth,
        json: { user_ids: [caller.id] },
      }),
    )
    expectNotFound(await t.api.delete(`/v1/groups/${aGroup}`, { auth }))
    const seen = await idsSeenBy(auth)
    expect(seen.users).toEqual([])
    expect(seen.groups).toEqual([])
    expect(await snapshotA()).toEqual(before)
  })

  it('B credentials never see A rows in GET /v1/users or /v1/groups', async () => {
    const aSeen = await idsSeenBy(a.api_key)
    expect(aSeen.users).toContain(aUser.id)
    expect(aSeen.groups).toContain(aGroup)

    const reader = await createUser(t, {
      auth: b.api_key,
      policy: [{ Resources: ['User::.*', 'Group::.*'], Activities: 'R' }],
    })
    for (const auth of [b.api_key, reader.apiKey, reader.accessToken]) {
      const seen = await idsSeenBy(auth)
      expect(seen.users.length).toBeGreaterThan(0)
      expect(seen.groups.length).toBeGreaterThan(0)
      expect(new Set(seen.accounts)).toEqual(new Set([b.account_id]))
      for (const id of aSeen.users) expect(seen.users).not.toContain(id)
      for (const id of aSeen.groups) expect(seen.groups).not.toContain(id)
      expect(seen.users).toContain(bUser.id)
      expect(seen.groups).toContain(bGroup)
    }
    // And the other way round.
    const bSeen = await idsSeenBy(b.api_key)
    for (const id of bSeen.users) expect(aSeen.users).not.toContain(id)
    for (const id of bSeen.groups) expect(aSeen.groups).not.toContain(id)
  })

  it("A's admin cannot reach B's rows either", async () => {
    const auth = a.api_key
    expectNotFound(await t.api.get(`/v1/users/${bUser.id}`, { auth }))
    expectNotFound(await t.api.get(`/v2/users/${b.userId}`, { auth }))
    expectNotFound(await t.api.get(`/v1/groups/${bGroup}`, { auth }))
    expectNotFound(await t.api.delete(`/v1/groups/${bGroup}`, { auth }))
    expectNotFound(await t.api.delete(`/v1/users/${bUser.id}`, { auth }))
  })

  it("cannot log in to A's user with B's account id", async () => {
    const wrong = await t.api.post('/v1/auth/login', {
      form: { account_id: b.account_id, username: aUser.username, password: aPassword },
    })
    expect(wrong.statusCode, wrong.body).toBe(401)
    expect(errorOf(wrong).type).toBe('authentication_error')

    // Both admins are called `admin`: each password opens only its own account.
    expect(a.username).toBe(b.username)
    const crossed = await t.api.post('/v1/auth/login', {
      form: { account_id: b.account_id, username: a.username, password: a.password },
    })
    expect(crossed.statusCode, crossed.body).toBe(401)
    const own = await t.api.post('/v1/auth/login', {
      form: { account_id: b.account_id, username: b.username, password: b.password },
    })
    expect(own.statusCode, own.body).toBe(200)
    expect(own.json().user).toMatchObject({ id: b.userId, account_id: b.account_id })
    const token = own.json().user.access_token as string
    expectNotFound(await t.api.get(`/v1/users/${a.userId}`, { auth: token }))

    const right = await t.api.post('/v1/auth/login', {
      form: { account_id: a.account_id, username: aUser.username, password: aPassword },
    })
    expect(right.statusCode, right.body).toBe(200)
    expect(right.json().user).toMatchObject({ id: aUser.id, account_id: a.account_id })
  })

  it('the same username and group name may exist in both accounts', async () => {
    const username = `same-${randomUUID()}`
    const inA = await t.api.post('/v1/users', {
      auth: a.api_key,
      form: { username, password: 'password-in-account-a' },
    })
    const inB = await t.api.post('/v1/users', {
      auth: b.api_key,
      form: { username, password: 'password-in-account-b' },
    })
    expect(inA.statusCode, inA.body).toBe(200)
    expect(inB.statusCode, inB.body).toBe(200)
    const [ua, ub] = [inA.json().user, inB.json().user]
    expect(ua.id).not.toBe(ub.id)
    expect(ua.account_id).toBe(a.account_id)
    expect(ub.account_id).toBe(b.account_id)

    const loginB = await t.api.post('/v1/auth/login', {
      form: { account_id: b.account_id, username, password: 'password-in-account-b' },
    })
    expect(loginB.statusCode, loginB.body).toBe(200)
    expect(loginB.json().user.id).toBe(ub.id)
    const crossed = await t.api.post('/v1/auth/login', {
      form: { account_id: b.account_id, username, password: 'password-in-account-a' },
    })
    expect(crossed.statusCode, crossed.body).toBe(401)

    const sameGroup = await t.api.post('/v1/groups', {
      auth: b.api_key,
      form: { name: 'shared-group-name' },
    })
    expect(sameGroup.statusCode, sameGroup.body).toBe(200)
    expect(sameGroup.json().group.id).not.toBe(aGroup)
  })
})
