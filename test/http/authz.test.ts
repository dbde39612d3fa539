import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import {
  type Api,
  b64,
  basicHeader,
  buildTestApp,
  type CallOptions,
  createUser,
  errorOf,
  type TestApp,
} from '../helpers/app.js'

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE'

interface Target {
  user: string
  group: string
}

interface RouteCase {
  method: Method
  /** The OpenAPI path template, checked against the running app's route list. */
  path: string
  options?: (target: Target) => CallOptions
  /** Accepts only an API key (spec: access_token and api_key endpoints). */
  apiKeyOnly?: boolean
}

/** Every route under /v1/users, /v2/users and /v1/groups, with a well-formed request. */
const PROTECTED_ROUTES: RouteCase[] = [
  { method: 'POST', path: '/v1/users', options: () => ({ form: { username: 'never-created' } }) },
  { method: 'GET', path: '/v1/users' },
  { method: 'GET', path: '/v2/users/{user_ids}' },
  { method: 'GET', path: '/v1/users/{user_id}' },
  {
    method: 'PUT',
    path: '/v1/users/{user_id}',
    options: () => ({ form: { username: 'never-renamed' } }),
  },
  { method: 'DELETE', path: '/v1/users/{user_id}' },
  {
    method: 'PUT',
    path: '/v1/users/{user_id}/password',
    options: () => ({ json: { password: 'a-long-enough-password' } }),
  },
  { method: 'POST', path: '/v1/users/{user_id}/access_token', apiKeyOnly: true },
  { method: 'POST', path: '/v1/users/{user_id}/api_key', apiKeyOnly: true },
  { method: 'POST', path: '/v1/users/{user_id}/access_key' },
  {
    method: 'POST',
    path: '/v1/users/{user_id}/mfa/start_enrollment',
    options: () => ({ json: { issuer: 'never-enrolled' } }),
  },
  {
    method: 'POST',
    path: '/v1/users/{user_id}/mfa/finalize_enrollment',
    options: () => ({ json: { mfa_code_1: '123456', mfa_code_2: '234567' } }),
  },
  {
    method: 'POST',
    path: '/v1/users/{user_id}/mfa/unenroll',
    options: () => ({ json: { mfa_code: '123456', password: 'a-long-enough-password' } }),
  },
  {
    method: 'POST',
    path: '/v1/users/search',
    options: () => ({
      form: { search_option: b64({ filter: { '$sys.username': { type: 'eq', value: 'x' } } }) },
    }),
  },
  // Refused before any provider is called (the test app's providers point at a closed port).
  {
    method: 'POST',
    path: '/v1/users/{user_id}/message/email',
    options: () => ({
      json: {
        provider: 'SENDGRID',
        auth: { sendgrid_api_key: 'SG.never-used' },
        template_id: '13b8f94f-bcae-4ec6-b752-70d6cb59f932',
        from_email_address: { literal_value: 'support@example.com' },
        to_email_address: { system_field: 'username' },
        substitutions: {},
      },
    }),
  },
  {
    method: 'POST',
    path: '/v1/users/{user_id}/message/sms',
    options: () => ({
      json: {
        provider: 'TWILIO',
        auth: { account_sid: 'AC1', username: 'SK1', password: 'never-used' },
        from_number: { literal_value: '+15555555555' },
        to_number: { user_attribute: 'phone' },
        message_body: 'never sent',
      },
    }),
  },
  {
    method: 'POST',
    path: '/v1/groups',
    options: () => ({ form: { name: 'never-created', policy: b64([]) } }),
  },
  { method: 'GET', path: '/v1/groups' },
  { method: 'GET', path: '/v1/groups/{group_id}' },
  {
    method: 'PUT',
    path: '/v1/groups/{group_id}',
    options: (t) => ({ json: { name: 'never-renamed', user_ids: [t.user] } }),
  },
  { method: 'DELETE', path: '/v1/groups/{group_id}' },
  {
    method: 'POST',
    path: '/v1/groups/{group_id}/membership',
    options: (t) => ({ json: { user_ids: [t.user] } }),
  },
  { method: 'DELETE', path: '/v1/groups/{group_id}/membership/{user_ids}' },
]

const PROTECTED_PREFIXES = ['/v1/users', '/v2/users', '/v1/groups']

function urlOf(route: RouteCase, target: Target): string {
  return route.path
    .replace('{user_ids}', target.user)
    .replace('{user_id}', target.user)
    .replace('{group_id}', target.group)
}

function send(api: Api, route: RouteCase, target: Target, auth: CallOptions) {
  return api.call(route.method, urlOf(route, target), { ...route.options?.(target), ...auth })
}

const label = (r: RouteCase) => `${r.method} ${r.path}`

function expectDenied(res: LightMyRequestResponse, type = 'authorization_error') {
  expect(res.statusCode, res.body).toBe(401)
  expect(errorOf(res).type).toBe(type)
}

const P = (activities: string, ...resources: string[]): PolicyStatement => ({
  Resources: resources,
  Activities: activities,
})

let seq = 0
const unique = (prefix: string) => `${prefix}-${++seq}-${randomUUID().slice(0, 8)}`

describe('route-level policy enforcement', () => {
  let t: TestApp
  let admin: string

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
  })
  afterAll(() => t.close())

  async function makeGroup(policy: PolicyStatement[] = [], userIds: string[] = []) {
    const res = await t.api.post('/v1/groups', {
      auth: admin,
      form: { name: unique('group'), policy: b64(policy), user_ids: userIds.join(',') },
    })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().group.id as string
  }

  async function userState(id: string) {
    const res = await t.api.get(`/v1/users/${id}?full=true`, { auth: admin })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().user as { username: string; status: string; group_ids: string[] }
  }

  async function groupState(id: string) {
    const res = await t.api.get(`/v1/groups/${id}?full=true`, { auth: admin })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().group as { name: string; policy: PolicyStatement[]; user_ids: string[] }
  }

  it('the route table lists every users and groups route of the app', () => {
    const doc = t.app.swagger() as { paths: Record<string, Record<string, unknown>> }
    const served = Object.entries(doc.paths)
      .filter(([path]) => PROTECTED_PREFIXES.some((p) => path.startsWith(p)))
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
    expect(PROTECTED_ROUTES.map(label).sort()).toEqual(served.sort())
  })

  describe('(a) a caller whose groups grant nothing', () => {
    const callers: Array<[string, PolicyStatement[] | undefined]> = [
      ['a user in no group', undefined],
      ['a user in a group with an empty policy', []],
      ['a user in a group whose statement has no Resources', [P('CRUD')]],
      ['a user in a group whose statement has no Activities', [P('', 'User::.*', 'Group::.*')]],
    ]

    it.each(callers)('%s gets 401 authorization_error on every route', async (_who, policy) => {
      const caller = await createUser(t, policy ? { policy } : {})
      const victim = await createUser(t)
      const group = await makeGroup([P('R', 'Group::.*')], [victim.id])
      const before = { user: await userState(victim.id), group: await groupState(group) }
      for (const target of [
        { user: victim.id, group },
        { user: caller.id, group },
      ]) {
        for (const route of PROTECTED_ROUTES) {
          const viaKey = await send(t.api, route, target, { auth: caller.apiKey })
          expect(viaKey.statusCode, `${label(route)}: ${viaKey.body}`).toBe(401)
          expect(errorOf(viaKey).type, label(route)).toBe('authorization_error')
          const viaToken = await send(t.api, route, target, { auth: caller.accessToken })
          expect(viaToken.statusCode, `${label(route)}: ${viaToken.body}`).toBe(401)
          expect(errorOf(viaToken).type, label(route)).toBe(
            route.apiKeyOnly ? 'authentication_error' : 'authorization_error',
          )
        }
      }
      // Nothing was changed by any of the refused requests.
      expect(await userState(victim.id)).toEqual(before.user)
      expect(await groupState(group)).toEqual(before.group)
      const users = (await t.api.get('/v1/users', { auth: admin })).json().users
      expect(users.map((u: { username: string }) => u.username)).not.toContain('never-created')
      const groups = (await t.api.get('/v1/groups', { auth: admin })).json().groups
      expect(groups.map((g: { name: string }) => g.name)).not.toContain('never-created')

      // The `self` routes still serve the caller.
      for (const auth of [caller.apiKey, caller.accessToken]) {
        const me = await t.api.get('/v1/auth/me?full=true', { auth })
        expect(me.statusCode, me.body).toBe(200)
        expect(me.json().user).toMatchObject({ id: caller.id, username: caller.username })
      }
      const put = await t.api.put('/v1/auth/me', {
        auth: caller.apiKey,
        form: { attributes: b64({ ok: true }) },
      })
      expect(put.statusCode, put.body).toBe(200)
      const out = await t.api.post('/v1/auth/logout', { auth: caller.accessToken })
      expect(out.statusCode, out.body).toBe(200)
      const all = await t.api.post('/v1/auth/logout_all', { auth: caller.apiKey })
      expect(all.statusCode, all.body).toBe(200)
    })
  })

  describe('(b) missing or invalid credentials', () => {
    const headers: Array<[string, Record<string, string>]> = [
      ['no Authorization header', {}],
      ['a malformed Basic header', { authorization: 'Basic !!!not-base64!!!' }],
      ['Basic without a colon', { authorization: `Basic ${Buffer.from('x').toString('base64')}` }],
      ['an unknown key', { authorization: basicHeader('not-a-real-credential') }],
      ['an unknown UUID key', { authorization: basicHeader(randomUUID()) }],
      ['an unknown SAT pair', { authorization: basicHeader(`sat-${randomUUID()}`, 'secret') }],
      ['another scheme', { authorization: 'Bearer abc.def.ghi' }],
    ]

    it.each(headers)('%s: 401 authentication_error on every protected route', async (_w, h) => {
      const target = { user: t.admin.userId, group: randomUUID() }
      for (const route of PROTECTED_ROUTES) {
        const res = await send(t.api, route, target, { headers: h })
        expect(res.statusCode, `${label(route)}: ${res.body}`).toBe(401)
        expect(errorOf(res).type, label(route)).toBe('authentication_error')
      }
      const logout = await t.api.post('/v1/auth/logout', { headers: h })
      expectDenied(logout, 'authentication_error')
      const logoutAll = await t.api.post('/v1/auth/logout_all', { headers: h })
      expectDenied(logoutAll, 'authentication_error')
    })

    it.each(headers)('%s: 400 on GET and PUT /v1/auth/me', async (_w, h) => {
      const get = await t.api.get('/v1/auth/me', { headers: h })
      expect(get.statusCode, get.body).toBe(400)
      expect(errorOf(get).type).toBe('authentication_error')
      const put = await t.api.put('/v1/auth/me', {
        headers: h,
        form: { attributes: b64({}) },
      })
      expect(put.statusCode, put.body).toBe(400)
    })

    it('a revoked access token and a replaced API key stop working', async () => {
      const user = await createUser(t, { policy: [P('R', 'Group::.*')] })
      const ok = await t.api.get('/v1/groups', { auth: user.accessToken })
      expect(ok.statusCode).toBe(200)
      expect((await t.api.post('/v1/auth/logout', { auth: user.accessToken })).statusCode).toBe(200)
      expectDenied(
        await t.api.get('/v1/groups', { auth: user.accessToken }),
        'authentication_error',
      )
      const rotated = await t.api.post(`/v1/users/${user.id}/api_key`, { auth: admin })
      expect(rotated.statusCode, rotated.body).toBe(200)
      expectDenied(await t.api.get('/v1/groups', { auth: user.apiKey }), 'authentication_error')
      const fresh = await t.api.get('/v1/groups', { auth: rotated.json().api_key })
      expect(fresh.statusCode).toBe(200)
    })
  })

  describe('(c) policy rows', () => {
    interface Fixture {
      /** Groups with empty policies; `x` is a member of both. */
      g: string
      g2: string
      /** Users in no group. */
      x: string
      y: string
    }
    interface Caller {
      id: string
      apiKey: string
      accessToken: string
    }
    interface Row {
      policy: (f: Fixture) => PolicyStatement[]
      call: (f: Fixture, c: Caller) => Promise<LightMyRequestResponse>
      status: 200 | 401 | 404
      type?: string
    }

    const getGroup = (id: (f: Fixture) => string) => (f: Fixture, c: Caller) =>
      t.api.get(`/v1/groups/${id(f)}`, { auth: c.apiKey })
    const putGroup = (id: (f: Fixture) => string) => (f: Fixture, c: Caller) =>
      t.api.put(`/v1/groups/${id(f)}`, { auth: c.apiKey, json: { name: unique('renamed') } })
    const deleteGroup = (id: (f: Fixture) => string) => (f: Fixture, c: Caller) =>
      t.api.delete(`/v1/groups/${id(f)}`, { auth: c.apiKey })
    const addMember = (group: (f: Fixture) => string, user: (f: Fixture, c: Caller) => string) =>
      ((f: Fixture, c: Caller) =>
        t.api.post(`/v1/groups/${group(f)}/membership`, {
          auth: c.apiKey,
          json: { user_ids: [user(f, c)] },
        })) satisfies Row['call']
    const removeMember = (group: (f: Fixture) => string, user: (f: Fixture) => string) =>
      ((f: Fixture, c: Caller) =>
        t.api.delete(`/v1/groups/${group(f)}/membership/${user(f)}`, {
          auth: c.apiKey,
        })) satisfies Row['call']
    const getUser = (id: (f: Fixture, c: Caller) => string) => (f: Fixture, c: Caller) =>
      t.api.get(`/v1/users/${id(f, c)}`, { auth: c.apiKey })
    const getUsersV2 = (ids: (f: Fixture, c: Caller) => string[]) => (f: Fixture, c: Caller) =>
      t.api.get(`/v2/users/${ids(f, c).join(',')}`, { auth: c.apiKey })
    const putUser = (id: (f: Fixture, c: Caller) => string) => (f: Fixture, c: Caller) =>
      t.api.put(`/v1/users/${id(f, c)}`, { auth: c.apiKey, form: { username: unique('u') } })
    const deleteUser = (id: (f: Fixture, c: Caller) => string) => (f: Fixture, c: Caller) =>
      t.api.delete(`/v1/users/${id(f, c)}`, { auth: c.apiKey })
    const createUserCall =
      (groupIds: (f: Fixture) => string[] = () => []) =>
      (f: Fixture, c: Caller) =>
        t.api.post('/v1/users', {
          auth: c.apiKey,
          form: { username: unique('new'), group_ids: groupIds(f).join(',') },
        })
    const setPassword = (id: (f: Fixture) => string) => (f: Fixture, c: Caller) =>
      t.api.put(`/v1/users/${id(f)}/password`, {
        auth: c.apiKey,
        json: { password: 'a-long-enough-password' },
      })
    const userAction =
      (action: 'api_key' | 'access_token' | 'access_key', via: 'apiKey' | 'accessToken') =>
      (f: Fixture, c: Caller) =>
        t.api.post(`/v1/users/${f.x}/${action}`, { auth: c[via] })

    const G = (f: Fixture) => `Group::${f.g}`
    const X = (f: Fixture) => `User::${f.x}`
    const g = (f: Fixture) => f.g
    const g2 = (f: Fixture) => f.g2
    const x = (f: Fixture) => f.x
    const y = (f: Fixture) => f.y
    const self = (_f: Fixture, c: Caller) => c.id

    const rows: Record<string, Row> = {
      // Group::GROUPID: R, U, D
      'R on Group::G allows GET G': {
        policy: (f) => [P('R', G(f))],
        call: getGroup(g),
        status: 200,
      },
      'R on Group::G refuses GET G2': {
        policy: (f) => [P('R', G(f))],
        call: getGroup(g2),
        status: 401,
      },
      'R on Group::G refuses PUT G': {
        policy: (f) => [P('R', G(f))],
        call: putGroup(g),
        status: 401,
      },
      'R on Group::G refuses DELETE G': {
        policy: (f) => [P('R', G(f))],
        call: deleteGroup(g),
        status: 401,
      },
      'R on Group::G (upper-case id) allows GET G': {
        policy: (f) => [P('R', `Group::${f.g.toUpperCase()}`)],
        call: getGroup(g),
        status: 200,
      },
      'U on Group::G allows PUT G': {
        policy: (f) => [P('U', G(f))],
        call: putGroup(g),
        status: 200,
      },
      'U on Group::G refuses PUT G2': {
        policy: (f) => [P('U', G(f))],
        call: putGroup(g2),
        status: 401,
      },
      'U on Group::G refuses GET G': {
        policy: (f) => [P('U', G(f))],
        call: getGroup(g),
        status: 401,
      },
      'D on Group::G allows DELETE G': {
        policy: (f) => [P('D', G(f))],
        call: deleteGroup(g),
        status: 200,
      },
      'D on Group::G refuses DELETE G2': {
        policy: (f) => [P('D', G(f))],
        call: deleteGroup(g2),
        status: 401,
      },
      'R on Group::.* allows GET G2': {
        policy: () => [P('R', 'Group::.*')],
        call: getGroup(g2),
        status: 200,
      },
      'U on Group::.* allows PUT G2': {
        policy: () => [P('U', 'Group::.*')],
        call: putGroup(g2),
        status: 200,
      },
      'D on Group::.* allows DELETE G2': {
        policy: () => [P('D', 'Group::.*')],
        call: deleteGroup(g2),
        status: 200,
      },
      'CRUD on Vault::.* does not reach groups': {
        policy: () => [P('CRUD', 'Vault::.*')],
        call: getGroup(g),
        status: 401,
      },
      '.* is not a regular expression over the whole resource': {
        policy: () => [P('CRUD', '.*')],
        call: getGroup(g),
        status: 401,
      },
      'a longer matcher does not cover a shorter resource': {
        policy: () => [P('CRUD', 'Group::.*::GroupMembership::.*')],
        call: getGroup(g),
        status: 401,
      },
      'the A letter grants nothing': {
        policy: () => [P('A', 'Group::.*')],
        call: getGroup(g),
        status: 401,
      },
      // Group::: C (create), R (list)
      'C on Group:: allows POST /v1/groups': {
        policy: () => [P('C', 'Group::')],
        call: (_f, c) => t.api.post('/v1/groups', { auth: c.apiKey, form: { name: unique('g') } }),
        status: 200,
      },
      'RUD on Group::.* refuses POST /v1/groups': {
        policy: () => [P('RUD', 'Group::.*')],
        call: (_f, c) => t.api.post('/v1/groups', { auth: c.apiKey, form: { name: unique('g') } }),
        status: 401,
      },
      'C on Group:: refuses GET /v1/groups': {
        policy: () => [P('C', 'Group::')],
        call: (_f, c) => t.api.get('/v1/groups', { auth: c.apiKey }),
        status: 401,
      },
      // Group::GROUPID::GroupMembership::USERID: C, D
      'C on Group::G::GroupMembership::X allows adding X to G': {
        policy: (f) => [P('C', `${G(f)}::GroupMembership::${f.x}`)],
        call: addMember(g, x),
        status: 200,
      },
      'C on Group::G::GroupMembership::X refuses adding Y to G': {
        policy: (f) => [P('C', `${G(f)}::GroupMembership::${f.x}`)],
        call: addMember(g, (f) => f.y),
        status: 401,
      },
      'C on Group::G::GroupMembership::X refuses adding X to G2': {
        policy: (f) => [P('C', `${G(f)}::GroupMembership::${f.x}`)],
        call: addMember(g2, (f) => f.x),
        status: 401,
      },
      'C on Group::G::GroupMembership::$[id=self.id] allows adding yourself': {
        policy: (f) => [P('C', `${G(f)}::GroupMembership::$[id=self.id]`)],
        call: addMember(g, self),
        status: 200,
      },
      'C on Group::G::GroupMembership::$[id=self.id] refuses adding X': {
        policy: (f) => [P('C', `${G(f)}::GroupMembership::$[id=self.id]`)],
        call: addMember(g, (f) => f.x),
        status: 401,
      },
      'D on Group::G::GroupMembership::X allows removing X from G': {
        policy: (f) => [P('D', `${G(f)}::GroupMembership::${f.x}`)],
        call: removeMember(g, x),
        status: 200,
      },
      'D on Group::G::GroupMembership::X refuses removing X from G2': {
        policy: (f) => [P('D', `${G(f)}::GroupMembership::${f.x}`)],
        call: removeMember(g2, x),
        status: 401,
      },
      'C on Group::G::GroupMembership::X refuses removing X': {
        policy: (f) => [P('C', `${G(f)}::GroupMembership::${f.x}`)],
        call: removeMember(g, x),
        status: 401,
      },
      'U on Group::G allows adding and removing members': {
        policy: (f) => [P('U', G(f))],
        call: async (f, c) => {
          const added = await addMember(g, (ff) => ff.y)(f, c)
          if (added.statusCode !== 200) return added
          return removeMember(g, x)(f, c)
        },
        status: 200,
      },
      // User::USERID: R, U, D
      'R on User::.* allows GET /v1/users/X': {
        policy: () => [P('R', 'User::.*')],
        call: getUser(x),
        status: 200,
      },
      'R on User::.* allows GET /v1/users': {
        policy: () => [P('R', 'User::.*')],
        call: (_f, c) => t.api.get('/v1/users', { auth: c.apiKey }),
        status: 200,
      },
      'R on User::.* allows GET /v2/users/X,Y': {
        policy: () => [P('R', 'User::.*')],
        call: getUsersV2((f) => [f.x, f.y]),
        status: 200,
      },
      'R on User::.* refuses PUT /v1/users/X': {
        policy: () => [P('R', 'User::.*')],
        call: putUser(x),
        status: 401,
      },
      'R on User::X allows GET X': { policy: (f) => [P('R', X(f))], call: getUser(x), status: 200 },
      'R on User::X refuses GET Y (v1: 401)': {
        policy: (f) => [P('R', X(f))],
        call: getUser(y),
        status: 401,
      },
      'R on User::X allows v2 GET X': {
        policy: (f) => [P('R', X(f))],
        call: getUsersV2((f) => [f.x]),
        status: 200,
      },
      'R on User::X refuses v2 GET X,Y (404)': {
        policy: (f) => [P('R', X(f))],
        call: getUsersV2((f) => [f.x, f.y]),
        status: 404,
        type: 'not_found_error',
      },
      'R on Group::.* only: v2 user read is a 404': {
        policy: () => [P('R', 'Group::.*')],
        call: getUsersV2((f) => [f.x]),
        status: 404,
        type: 'not_found_error',
      },
      'R on Group::.* only refuses GET /v1/users': {
        policy: () => [P('R', 'Group::.*')],
        call: (_f, c) => t.api.get('/v1/users', { auth: c.apiKey }),
        status: 401,
      },
      'R on User::$[id=self.id] allows reading yourself (v1)': {
        policy: () => [P('R', 'User::$[id=self.id]')],
        call: getUser(self),
        status: 200,
      },
      'R on User::$[id=self.id] allows reading yourself (v2)': {
        policy: () => [P('R', 'User::$[id=self.id]')],
        call: getUsersV2((_f, c) => [c.id]),
        status: 200,
      },
      'R on User::$[id=self.id] refuses reading X (v1)': {
        policy: () => [P('R', 'User::$[id=self.id]')],
        call: getUser(x),
        status: 401,
      },
      'R on User::$[id=self.id] refuses reading X (v2: 404)': {
        policy: () => [P('R', 'User::$[id=self.id]')],
        call: getUsersV2((f) => [f.x]),
        status: 404,
      },
      'U on User::X allows PUT X': { policy: (f) => [P('U', X(f))], call: putUser(x), status: 200 },
      'U on User::X refuses PUT Y': {
        policy: (f) => [P('U', X(f))],
        call: putUser(y),
        status: 401,
      },
      'U on User::X refuses GET X': {
        policy: (f) => [P('U', X(f))],
        call: getUser(x),
        status: 401,
      },
      'U on User::$[id=self.id] allows updating yourself': {
        policy: () => [P('U', 'User::$[id=self.id]')],
        call: putUser(self),
        status: 200,
      },
      'U on User::$[id=self.id] refuses updating X': {
        policy: () => [P('U', 'User::$[id=self.id]')],
        call: putUser(x),
        status: 401,
      },
      'D on User::X allows DELETE X': {
        policy: (f) => [P('D', X(f))],
        call: deleteUser(x),
        status: 200,
      },
      'D on User::X refuses DELETE Y': {
        policy: (f) => [P('D', X(f))],
        call: deleteUser(y),
        status: 401,
      },
      'D on User::$[id=self.id] allows deleting yourself': {
        policy: () => [P('D', 'User::$[id=self.id]')],
        call: deleteUser(self),
        status: 200,
      },
      // User::: C (create), R (list)
      'C on User:: allows POST /v1/users': {
        policy: () => [P('C', 'User::')],
        call: createUserCall(),
        status: 200,
      },
      'RUD on User::.* refuses POST /v1/users': {
        policy: () => [P('RUD', 'User::.*')],
        call: createUserCall(),
        status: 401,
      },
      'C on User::.* covers the collection (.* matches its empty last token)': {
        policy: () => [P('C', 'User::.*')],
        call: createUserCall(),
        status: 200,
      },
      'C on User:: alone refuses POST /v1/users with group_ids': {
        policy: () => [P('C', 'User::')],
        call: createUserCall((f) => [f.g]),
        status: 401,
      },
      'C on User:: and C on Group::G::GroupMembership::.* allow group_ids=G': {
        policy: (f) => [P('C', 'User::'), P('C', `${G(f)}::GroupMembership::.*`)],
        call: createUserCall((f) => [f.g]),
        status: 200,
      },
      'C on User:: and U on Group::G allow group_ids=G': {
        policy: (f) => [P('C', 'User::'), P('U', G(f))],
        call: createUserCall((f) => [f.g]),
        status: 200,
      },
      'C on User:: and U on Group::G refuse group_ids=G,G2': {
        policy: (f) => [P('C', 'User::'), P('U', G(f))],
        call: createUserCall((f) => [f.g, f.g2]),
        status: 401,
      },
      // User::USERID::Password: U
      'U on User::X::Password allows setting X password': {
        policy: (f) => [P('U', `${X(f)}::Password`)],
        call: setPassword(x),
        status: 200,
      },
      'U on User::X allows setting X password': {
        policy: (f) => [P('U', X(f))],
        call: setPassword(x),
        status: 200,
      },
      'U on User::X::Password refuses setting Y password': {
        policy: (f) => [P('U', `${X(f)}::Password`)],
        call: setPassword(y),
        status: 401,
      },
      'U on User::X::Password refuses PUT /v1/users/X': {
        policy: (f) => [P('U', `${X(f)}::Password`)],
        call: putUser(x),
        status: 401,
      },
      // Credentials vended for a user need U on the user.
      'U on User::X allows a new API key (API key)': {
        policy: (f) => [P('U', X(f))],
        call: userAction('api_key', 'apiKey'),
        status: 200,
      },
      'U on User::X allows a new access token (API key)': {
        policy: (f) => [P('U', X(f))],
        call: userAction('access_token', 'apiKey'),
        status: 200,
      },
      'U on User::X allows a new access key pair': {
        policy: (f) => [P('U', X(f))],
        call: userAction('access_key', 'accessToken'),
        status: 200,
      },
      'an access token may not replace an API key': {
        policy: (f) => [P('U', X(f))],
        call: userAction('api_key', 'accessToken'),
        status: 401,
        type: 'authentication_error',
      },
      'an access token may not vend an access token': {
        policy: (f) => [P('U', X(f))],
        call: userAction('access_token', 'accessToken'),
        status: 401,
        type: 'authentication_error',
      },
      'R on User::X refuses a new API key': {
        policy: (f) => [P('R', X(f))],
        call: userAction('api_key', 'apiKey'),
        status: 401,
      },
    }

    it.each(Object.entries(rows))('%s', async (_name, row) => {
      const [x, y] = await Promise.all([createUser(t), createUser(t)])
      const [g, g2] = await Promise.all([makeGroup([], [x.id]), makeGroup([], [x.id])])
      const f: Fixture = { g, g2, x: x.id, y: y.id }
      const caller = await createUser(t, { policy: row.policy(f) })
      const res = await row.call(f, caller)
      expect(res.statusCode, res.body).toBe(row.status)
      if (row.status !== 200) {
        expect(errorOf(res).type).toBe(
          row.type ?? (row.status === 401 ? 'authorization_error' : 'not_found_error'),
        )
      }
    })

    it('lists show only what the caller may read', async () => {
      const x = await createUser(t)
      const g1 = await makeGroup()
      await makeGroup()
      const groupsOf = async (policy: PolicyStatement[]) => {
        const caller = await createUser(t, { policy })
        const res = await t.api.get('/v1/groups', { auth: caller.apiKey })
        expect(res.statusCode, res.body).toBe(200)
        return (res.json().groups as Array<{ id: string }>).map((g) => g.id)
      }
      expect(await groupsOf([P('R', `Group::${g1}`)])).toEqual([g1])
      // R on the collection alone is the "list" right: it lists no item a read would refuse.
      expect(await groupsOf([P('R', 'Group::')])).toEqual([])

      const usersOf = async (policy: PolicyStatement[]) => {
        const caller = await createUser(t, { policy })
        const res = await t.api.get('/v1/users', { auth: caller.apiKey })
        expect(res.statusCode, res.body).toBe(200)
        return { caller, ids: (res.json().users as Array<{ id: string }>).map((u) => u.id) }
      }
      const own = await usersOf([P('R', 'User::$[id=self.id]')])
      expect(own.ids).toEqual([own.caller.id])
      expect((await usersOf([P('R', `User::${x.id}`)])).ids).toEqual([x.id])
      const all = await usersOf([P('R', 'User::.*')])
      expect(all.ids).toContain(x.id)
      expect(all.ids).toContain(t.admin.userId)
    })

    it('policies of all the caller groups add up', async () => {
      const target = await makeGroup()
      const caller = await createUser(t, { policy: [P('R', `Group::${target}`)] })
      expect((await putGroup(() => target)({} as Fixture, caller)).statusCode).toBe(401)
      await makeGroup([P('U', `Group::${target}`)], [caller.id])
      expect((await getGroup(() => target)({} as Fixture, caller)).statusCode).toBe(200)
      expect((await putGroup(() => target)({} as Fixture, caller)).statusCode).toBe(200)
    })
  })

  describe('changes take effect on the very next request', () => {
    async function setup() {
      const target = await makeGroup()
      const other = await makeGroup()
      const caller = await createUser(t, { policy: [P('R', 'Group::.*')] })
      const [own] = (await userState(caller.id)).group_ids
      if (!own) throw new Error('caller has no group')
      const canRead = async (id = target) => {
        const key = await t.api.get(`/v1/groups/${id}`, { auth: caller.apiKey })
        const token = await t.api.get(`/v1/groups/${id}`, { auth: caller.accessToken })
        expect(token.statusCode).toBe(key.statusCode)
        if (key.statusCode !== 200) expectDenied(key)
        return key.statusCode === 200
      }
      return { target, other, caller, own, canRead }
    }

    it('revoking and restoring a membership', async () => {
      const { caller, own, canRead } = await setup()
      expect(await canRead()).toBe(true)
      const del = await t.api.delete(`/v1/groups/${own}/membership/${caller.id}`, { auth: admin })
      expect(del.statusCode, del.body).toBe(200)
      expect(await canRead()).toBe(false)
      const add = await t.api.post(`/v1/groups/${own}/membership`, {
        auth: admin,
        json: { user_ids: [caller.id] },
      })
      expect(add.statusCode, add.body).toBe(200)
      expect(await canRead()).toBe(true)
      const remove = await t.api.put(`/v1/groups/${own}`, {
        auth: admin,
        json: { user_ids: [caller.id], user_operation: 'REMOVE' },
      })
      expect(remove.statusCode, remove.body).toBe(200)
      expect(await canRead()).toBe(false)
      const append = await t.api.put(`/v1/groups/${own}`, {
        auth: admin,
        form: { operation: 'APPEND', user_ids: caller.id },
      })
      expect(append.statusCode, append.body).toBe(200)
      expect(await canRead()).toBe(true)
    })

    it("changing the group's policy", async () => {
      const { target, other, own, canRead } = await setup()
      expect(await canRead()).toBe(true)
      const cleared = await t.api.put(`/v1/groups/${own}`, { auth: admin, json: { policy: [] } })
      expect(cleared.statusCode, cleared.body).toBe(200)
      expect(await canRead()).toBe(false)

      const narrowed = await t.api.put(`/v1/groups/${own}`, {
        auth: admin,
        json: { policy: [P('R', `Group::${other}`)] },
      })
      expect(narrowed.statusCode, narrowed.body).toBe(200)
      expect(await canRead(target)).toBe(false)
      expect(await canRead(other)).toBe(true)

      const widened = await t.api.put(`/v1/groups/${own}`, {
        auth: admin,
        multipart: { policy: b64([P('R', 'Group::.*')]) },
      })
      expect(widened.statusCode, widened.body).toBe(200)
      expect(await canRead(target)).toBe(true)
    })

    it('deleting the group', async () => {
      const { own, canRead } = await setup()
      expect(await canRead()).toBe(true)
      expect((await t.api.delete(`/v1/groups/${own}`, { auth: admin })).statusCode).toBe(200)
      expect(await canRead()).toBe(false)
    })
  })
})
