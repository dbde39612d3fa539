import { randomUUID } from 'node:crypto'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PolicyStatement } from '../../src/policy/index.js'
import { b64, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

interface GroupBody {
  id: string
  group_id: string
  name: string
  policy: PolicyStatement[]
  user_ids?: string[]
}

const READ_GROUPS: PolicyStatement[] = [{ Resources: ['Group::.*'], Activities: 'R' }]
const POLICY: PolicyStatement[] = [
  { Resources: ['Vault::.*', 'Vault::.*::Document::.*'], Activities: 'CRUD' },
  { Resources: ['User::$[id=self.id]'], Activities: 'RU' },
]

let seq = 0
const uniqueName = (prefix = 'group') => `${prefix}-${++seq}-${randomUUID().slice(0, 8)}`

/** Ruby's Base64.encode64: a newline every 60 characters and a trailing one. */
const rubyB64 = (value: unknown) => `${b64(value).replace(/(.{60})/g, '$1\n')}\n`

function groupOf(res: LightMyRequestResponse): GroupBody {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  expect(typeof body.transaction_id).toBe('string')
  return body.group as GroupBody
}

function expectError(res: LightMyRequestResponse, status: number, message?: RegExp) {
  expect(res.statusCode, res.body).toBe(status)
  const error = errorOf(res)
  if (message) expect(error.message).toMatch(message)
  return error
}

describe('groups HTTP API', () => {
  let t: TestApp
  let admin: string

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
  })
  afterAll(() => t.close())

  /** Creates a group as the admin (urlencoded form). */
  async function makeGroup(options: { policy?: PolicyStatement[]; userIds?: string[] } = {}) {
    const form: Record<string, string> = { name: uniqueName() }
    if (options.policy) form.policy = b64(options.policy)
    if (options.userIds) form.user_ids = options.userIds.join(',')
    return groupOf(await t.api.post('/v1/groups', { auth: admin, form }))
  }

  /** A user without password (no hashing), in no group. */
  async function makeUser(policy?: PolicyStatement[]) {
    return createUser(t, policy ? { policy } : {})
  }

  async function members(groupId: string): Promise<string[]> {
    const g = groupOf(await t.api.get(`/v1/groups/${groupId}?full=true`, { auth: admin }))
    return [...(g.user_ids ?? [])].sort()
  }

  async function groupIdsOfUser(userId: string): Promise<string[]> {
    const res = await t.api.get(`/v1/users/${userId}?full=true`, { auth: admin })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().user.group_ids
  }

  async function groupNames(): Promise<string[]> {
    const res = await t.api.get('/v1/groups', { auth: admin })
    expect(res.statusCode, res.body).toBe(200)
    return (res.json().groups as GroupBody[]).map((g) => g.name)
  }

  describe('POST /v1/groups', () => {
    it('creates from a urlencoded form with a base64 policy and user ids', async () => {
      const [u1, u2] = [await makeUser(), await makeUser()]
      const name = uniqueName()
      const g = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          form: { name, policy: b64(POLICY), user_ids: `${u1?.id},${u2?.id}` },
        }),
      )
      expect(Object.keys(g).sort()).toEqual(['group_id', 'id', 'name', 'policy', 'user_ids'])
      expect(g.id).toMatch(/^[0-9a-f-]{36}$/)
      expect(g.group_id).toBe(g.id)
      expect(g.name).toBe(name)
      expect(Array.isArray(g.policy)).toBe(true)
      expect(g.policy).toEqual(POLICY)
      expect([...(g.user_ids ?? [])].sort()).toEqual([u1?.id, u2?.id].sort())
      expect(await members(g.id)).toEqual([u1?.id, u2?.id].sort())
    })

    it('creates from a multipart form (as the official SDK sends it)', async () => {
      const u = await makeUser()
      const name = uniqueName()
      const g = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          multipart: { name, policy: b64(POLICY), user_ids: u.id },
        }),
      )
      expect(g).toMatchObject({ name, policy: POLICY, user_ids: [u.id] })
      expect(g.group_id).toBe(g.id)
    })

    it('creates from query-string parameters with an empty body', async () => {
      const u = await makeUser()
      const name = uniqueName()
      const g = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          query: { name, policy: b64(POLICY), user_ids: u.id },
        }),
      )
      expect(g).toMatchObject({ name, policy: POLICY, user_ids: [u.id] })
      // The recorded Ruby client sent `policy=&user_ids=` (empty) in the query string.
      const empty = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          query: { name: uniqueName(), policy: '', user_ids: '' },
        }),
      )
      expect(empty.policy).toEqual([])
      expect(empty.user_ids).toEqual([])
    })

    it('accepts base64 with embedded newlines (Ruby encode64) in a form and a query', async () => {
      const encoded = rubyB64(POLICY)
      expect(encoded).toContain('\n')
      const viaForm = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          form: { name: uniqueName(), policy: encoded },
        }),
      )
      expect(viaForm.policy).toEqual(POLICY)
      const viaQuery = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          query: { name: uniqueName(), policy: encoded },
        }),
      )
      expect(viaQuery.policy).toEqual(POLICY)
      const viaMultipart = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          multipart: { name: uniqueName(), policy: encoded.replace(/\n/g, '\r\n') },
        }),
      )
      expect(viaMultipart.policy).toEqual(POLICY)
    })

    it('treats a missing or empty policy as []', async () => {
      const missing = groupOf(
        await t.api.post('/v1/groups', { auth: admin, form: { name: uniqueName() } }),
      )
      expect(missing.policy).toEqual([])
      expect(missing.user_ids).toEqual([])
      const empty = groupOf(
        await t.api.post('/v1/groups', { auth: admin, form: { name: uniqueName(), policy: '' } }),
      )
      expect(empty.policy).toEqual([])
      const read = groupOf(await t.api.get(`/v1/groups/${empty.id}`, { auth: admin }))
      expect(read.policy).toEqual([])
    })

    it.each([
      ['not base64', '%%% not base64 %%%'],
      ['base64 of text that is not JSON', Buffer.from('not json').toString('base64')],
      ['base64 of a JSON object', b64({ Resources: ['Group::.*'], Activities: 'R' })],
      ['base64 of an array of numbers', b64([1, 2])],
      ['an unknown activity letter', b64([{ Resources: ['Group::.*'], Activities: 'RX' }])],
      ['Resources that are not strings', b64([{ Resources: [1], Activities: 'R' }])],
      ['missing Activities', b64([{ Resources: ['Group::.*'] }])],
    ])('rejects a policy that is %s with 400 naming policy', async (_what, policy) => {
      const name = uniqueName()
      const res = await t.api.post('/v1/groups', { auth: admin, form: { name, policy } })
      const error = expectError(res, 400, /^policy\b/)
      expect(error.type).toBe('invalid_request_error')
      expect(await groupNames()).not.toContain(name)
    })

    it('requires a name', async () => {
      expectError(
        await t.api.post('/v1/groups', { auth: admin, form: { policy: b64(POLICY) } }),
        400,
        /^name\b/,
      )
      expectError(
        await t.api.post('/v1/groups', { auth: admin, form: { name: '   ' } }),
        400,
        /^name\b/,
      )
      expectError(await t.api.post('/v1/groups', { auth: admin }), 400, /^name\b/)
      expectError(
        await t.api.post('/v1/groups', { auth: admin, form: { name: 'n'.repeat(256) } }),
        400,
        /^name\b/,
      )
    })

    it('rejects a duplicate name with 400 and creates nothing', async () => {
      const first = await makeGroup({ policy: POLICY })
      const res = await t.api.post('/v1/groups', {
        auth: admin,
        form: { name: first.name, policy: b64([]) },
      })
      expectError(res, 400, /^name\b/)
      expect((await groupNames()).filter((n) => n === first.name)).toHaveLength(1)
      const kept = groupOf(await t.api.get(`/v1/groups/${first.id}`, { auth: admin }))
      expect(kept.policy).toEqual(POLICY)
    })

    it('ignores unknown (well-formed) user ids', async () => {
      const u = await makeUser()
      const g = groupOf(
        await t.api.post('/v1/groups', {
          auth: admin,
          form: { name: uniqueName(), user_ids: `${randomUUID()}, ${u.id} ,${randomUUID()}` },
        }),
      )
      expect(g.user_ids).toEqual([u.id])
    })

    it('rejects a malformed user id with 400 and creates nothing', async () => {
      const u = await makeUser()
      const name = uniqueName()
      const res = await t.api.post('/v1/groups', {
        auth: admin,
        form: { name, user_ids: `${u.id},not-a-uuid` },
      })
      expectError(res, 400, /user_ids/)
      expect(await groupNames()).not.toContain(name)
    })

    describe('adding members at creation needs membership rights on any group', () => {
      const CREATE: PolicyStatement = { Resources: ['Group::'], Activities: 'C' }

      it('C on Group:: alone creates an empty group but 401 with user_ids', async () => {
        const caller = await makeUser([CREATE])
        const member = await makeUser()
        const empty = groupOf(
          await t.api.post('/v1/groups', {
            auth: caller.apiKey,
            form: { name: uniqueName(), policy: b64(POLICY) },
          }),
        )
        expect(empty.user_ids).toEqual([])
        const name = uniqueName()
        const res = await t.api.post('/v1/groups', {
          auth: caller.apiKey,
          form: { name, user_ids: member.id },
        })
        expect(expectError(res, 401).type).toBe('authorization_error')
        expect(await groupNames()).not.toContain(name)
        expect(await groupIdsOfUser(member.id)).toEqual([])
      })

      it('membership rights on one specific group are not enough', async () => {
        const other = await makeGroup()
        const caller = await makeUser([
          CREATE,
          { Resources: [`Group::${other.id}::GroupMembership::.*`], Activities: 'C' },
          { Resources: [`Group::${other.id}`], Activities: 'U' },
        ])
        const member = await makeUser()
        const res = await t.api.post('/v1/groups', {
          auth: caller.apiKey,
          form: { name: uniqueName(), user_ids: member.id },
        })
        expect(expectError(res, 401).type).toBe('authorization_error')
      })

      it.each([
        ['C on Group::.*::GroupMembership::.*', 'Group::.*::GroupMembership::.*', 'C'],
        ['U on Group::.*', 'Group::.*', 'U'],
      ])('%s allows user_ids', async (_what, matcher, activity) => {
        const caller = await makeUser([CREATE, { Resources: [matcher], Activities: activity }])
        const member = await makeUser()
        const g = groupOf(
          await t.api.post('/v1/groups', {
            auth: caller.apiKey,
            form: { name: uniqueName(), user_ids: member.id },
          }),
        )
        expect(g.user_ids).toEqual([member.id])
      })

      it('without C on Group:: even membership rights cannot create', async () => {
        const caller = await makeUser([
          { Resources: ['Group::.*::GroupMembership::.*'], Activities: 'C' },
          { Resources: ['Group::.*'], Activities: 'RUD' },
        ])
        const res = await t.api.post('/v1/groups', {
          auth: caller.apiKey,
          form: { name: uniqueName() },
        })
        expect(expectError(res, 401).type).toBe('authorization_error')
      })
    })
  })

  describe('GET /v1/groups/{group_id}', () => {
    it('omits user_ids without full, adds them with full=true', async () => {
      const u = await makeUser()
      const g = await makeGroup({ policy: POLICY, userIds: [u.id] })
      for (const query of ['', '?full=false', '?full=0']) {
        const plain = groupOf(await t.api.get(`/v1/groups/${g.id}${query}`, { auth: admin }))
        expect(Object.keys(plain).sort()).toEqual(['group_id', 'id', 'name', 'policy'])
        expect(plain).toEqual({ id: g.id, group_id: g.id, name: g.name, policy: POLICY })
      }
      for (const query of ['?full=true', '?full=1']) {
        const full = groupOf(await t.api.get(`/v1/groups/${g.id}${query}`, { auth: admin }))
        expect(full).toEqual({
          id: g.id,
          group_id: g.id,
          name: g.name,
          policy: POLICY,
          user_ids: [u.id],
        })
      }
      const upper = groupOf(await t.api.get(`/v1/groups/${g.id.toUpperCase()}`, { auth: admin }))
      expect(upper.id).toBe(g.id)
    })

    it('404 for an unknown group, 400 for a malformed id', async () => {
      const missing = expectError(
        await t.api.get(`/v1/groups/${randomUUID()}`, { auth: admin }),
        404,
      )
      expect(missing.type).toBe('not_found_error')
      expectError(await t.api.get('/v1/groups/not-a-uuid', { auth: admin }), 400, /group_id/)
    })
  })

  describe('GET /v1/groups', () => {
    it('lists id, group_id, name and policy (no user_ids)', async () => {
      const u = await makeUser()
      const g = await makeGroup({ policy: POLICY, userIds: [u.id] })
      const res = await t.api.get('/v1/groups?full=true', { auth: admin })
      expect(res.statusCode, res.body).toBe(200)
      const groups = res.json().groups as GroupBody[]
      expect(groups.length).toBeGreaterThan(1)
      for (const item of groups) {
        expect(Object.keys(item).sort()).toEqual(['group_id', 'id', 'name', 'policy'])
        expect(item.group_id).toBe(item.id)
        expect(Array.isArray(item.policy)).toBe(true)
      }
      expect(groups.find((x) => x.id === g.id)).toEqual({
        id: g.id,
        group_id: g.id,
        name: g.name,
        policy: POLICY,
      })
    })

    it('shows only the groups the caller may read', async () => {
      const [g1, g2] = [await makeGroup(), await makeGroup()]
      await makeGroup()
      const one = await makeUser([{ Resources: [`Group::${g1.id}`], Activities: 'R' }])
      const res1 = await t.api.get('/v1/groups', { auth: one.apiKey })
      expect(res1.statusCode, res1.body).toBe(200)
      expect((res1.json().groups as GroupBody[]).map((g) => g.id)).toEqual([g1.id])

      const two = await makeUser([
        { Resources: [`Group::${g1.id}`, `Group::${g2.id}`], Activities: 'R' },
        { Resources: ['Group::.*'], Activities: 'UD' },
      ])
      const res2 = await t.api.get('/v1/groups', { auth: two.accessToken })
      expect(res2.statusCode, res2.body).toBe(200)
      expect((res2.json().groups as GroupBody[]).map((g) => g.id).sort()).toEqual(
        [g1.id, g2.id].sort(),
      )

      const all = await makeUser(READ_GROUPS)
      const res3 = await t.api.get('/v1/groups', { auth: all.apiKey })
      const adminList = await t.api.get('/v1/groups', { auth: admin })
      expect((res3.json().groups as GroupBody[]).map((g) => g.id)).toEqual(
        (adminList.json().groups as GroupBody[]).map((g) => g.id),
      )
    })

    it('401 for a caller with no read rule on groups', async () => {
      const caller = await makeUser([{ Resources: ['Group::'], Activities: 'C' }])
      const res = await t.api.get('/v1/groups', { auth: caller.apiKey })
      expect(expectError(res, 401).type).toBe('authorization_error')
    })
  })

  describe('PUT /v1/groups/{group_id} (JSON)', () => {
    it('APPENDs by default, APPENDs explicitly and REMOVEs members', async () => {
      const [u1, u2, u3] = [await makeUser(), await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id] })

      const appended = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, { auth: admin, json: { user_ids: [u2.id] } }),
      )
      expect([...(appended.user_ids ?? [])].sort()).toEqual([u1.id, u2.id].sort())
      expect(appended.group_id).toBe(g.id)

      const explicit = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          json: { user_ids: [u3.id, u1.id.toUpperCase()], user_operation: 'APPEND' },
        }),
      )
      expect([...(explicit.user_ids ?? [])].sort()).toEqual([u1.id, u2.id, u3.id].sort())

      const removed = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          json: { user_ids: [u1.id, u3.id], user_operation: 'REMOVE' },
        }),
      )
      expect(removed.user_ids).toEqual([u2.id])
      expect(await members(g.id)).toEqual([u2.id])
      expect(await groupIdsOfUser(u1.id)).toEqual([])
    })

    it('ignores unknown users on APPEND and non-members on REMOVE', async () => {
      const [u1, u2] = [await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id] })
      const appended = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          json: { user_ids: [randomUUID()], user_operation: 'APPEND' },
        }),
      )
      expect(appended.user_ids).toEqual([u1.id])
      const removed = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          json: { user_ids: [u2.id, randomUUID()], user_operation: 'REMOVE' },
        }),
      )
      expect(removed.user_ids).toEqual([u1.id])
    })

    it('renames and replaces the policy (a JSON array); other fields stay', async () => {
      const u = await makeUser()
      const g = await makeGroup({ policy: POLICY, userIds: [u.id] })
      const name = uniqueName('renamed')
      const renamed = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, { auth: admin, json: { name } }),
      )
      expect(renamed).toEqual({ id: g.id, group_id: g.id, name, policy: POLICY, user_ids: [u.id] })

      const next: PolicyStatement[] = [{ Resources: ['Group::.*'], Activities: 'R' }]
      const updated = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, { auth: admin, json: { policy: next } }),
      )
      expect(updated).toMatchObject({ name, policy: next, user_ids: [u.id] })
      const read = groupOf(await t.api.get(`/v1/groups/${g.id}`, { auth: admin }))
      expect(read).toEqual({ id: g.id, group_id: g.id, name, policy: next })

      const cleared = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, { auth: admin, json: { policy: [] } }),
      )
      expect(cleared.policy).toEqual([])
    })

    it('rejects bad input with 400 and changes nothing', async () => {
      const u = await makeUser()
      const g = await makeGroup({ policy: POLICY, userIds: [u.id] })
      const other = await makeGroup()
      const put = (json: unknown) => t.api.put(`/v1/groups/${g.id}`, { auth: admin, json })

      expectError(await put({ user_ids: u.id }), 400, /^user_ids\b/)
      expectError(await put({ user_ids: `${u.id},${u.id}` }), 400, /^user_ids\b/)
      expectError(await put({ user_ids: { id: u.id } }), 400, /^user_ids\b/)
      expectError(await put({ user_ids: ['not-a-uuid'] }), 400, /user_ids/)
      expectError(
        await put({ user_ids: [u.id], user_operation: 'DELETE' }),
        400,
        /^user_operation\b/,
      )
      expectError(await put({ policy: b64(POLICY) }), 400, /^policy\b/)
      expectError(await put({ policy: { Resources: ['x'], Activities: 'R' } }), 400, /^policy\b/)
      expectError(await put({ policy: [{ Resources: ['x'], Activities: 'Z' }] }), 400, /^policy/)
      expectError(await put({ name: '' }), 400, /^name\b/)
      expectError(await put({ name: other.name }), 400, /^name\b/)

      const after = groupOf(await t.api.get(`/v1/groups/${g.id}?full=true`, { auth: admin }))
      expect(after).toEqual({ ...g, user_ids: [u.id] })
    })

    it('404 for an unknown group', async () => {
      const res = await t.api.put(`/v1/groups/${randomUUID()}`, {
        auth: admin,
        json: { name: uniqueName() },
      })
      expect(expectError(res, 404).type).toBe('not_found_error')
    })
  })

  describe('PUT /v1/groups/{group_id} (deprecated form)', () => {
    it('APPENDs with operation and comma user_ids (multipart)', async () => {
      const [u1, u2, u3] = [await makeUser(), await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id] })
      const appended = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          multipart: { operation: 'APPEND', user_ids: `${u2.id},${u3.id}` },
        }),
      )
      expect([...(appended.user_ids ?? [])].sort()).toEqual([u1.id, u2.id, u3.id].sort())
      expect(appended.group_id).toBe(g.id)
    })

    it('REMOVEs with operation and comma user_ids (urlencoded)', async () => {
      const [u1, u2, u3] = [await makeUser(), await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id, u2.id, u3.id] })
      const removed = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          form: { operation: 'REMOVE', user_ids: `${u1.id}, ${u3.id}` },
        }),
      )
      expect(removed.user_ids).toEqual([u2.id])
    })

    it('takes operation and user_ids from the query string; an empty PUT changes nothing', async () => {
      const [u1, u2] = [await makeUser(), await makeUser()]
      const g = await makeGroup({ policy: POLICY, userIds: [u1.id] })
      // As the recorded Ruby client sent it: `PUT /v1/groups/ID?operation=APPEND&user_ids=ID`.
      const appended = groupOf(
        await t.api.put(`/v1/groups/${g.id}?operation=APPEND&user_ids=${u2.id}`, { auth: admin }),
      )
      expect([...(appended.user_ids ?? [])].sort()).toEqual([u1.id, u2.id].sort())
      const removed = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          query: { operation: 'REMOVE', user_ids: u1.id },
        }),
      )
      expect(removed.user_ids).toEqual([u2.id])
      const unchanged = groupOf(await t.api.put(`/v1/groups/${g.id}?`, { auth: admin }))
      expect(unchanged).toEqual({
        id: g.id,
        group_id: g.id,
        name: g.name,
        policy: POLICY,
        user_ids: [u2.id],
      })
    })

    it('APPENDs when operation is omitted', async () => {
      const u = await makeUser()
      const g = await makeGroup()
      const appended = groupOf(
        await t.api.put(`/v1/groups/${g.id}`, { auth: admin, form: { user_ids: u.id } }),
      )
      expect(appended.user_ids).toEqual([u.id])
    })

    it('renames and replaces the policy from base64 (multipart, urlencoded, query)', async () => {
      const g = await makeGroup({ policy: POLICY })
      const p1: PolicyStatement[] = [{ Resources: ['Group::.*'], Activities: 'R' }]
      const n1 = uniqueName()
      expect(
        groupOf(
          await t.api.put(`/v1/groups/${g.id}`, {
            auth: admin,
            multipart: { name: n1, policy: b64(p1) },
          }),
        ),
      ).toMatchObject({ name: n1, policy: p1, user_ids: [] })

      const p2: PolicyStatement[] = [{ Resources: ['User::.*'], Activities: 'RU' }]
      expect(
        groupOf(
          await t.api.put(`/v1/groups/${g.id}`, { auth: admin, form: { policy: rubyB64(p2) } }),
        ),
      ).toMatchObject({ name: n1, policy: p2 })

      const n3 = uniqueName()
      expect(
        groupOf(
          await t.api.put(`/v1/groups/${g.id}`, {
            auth: admin,
            query: { name: n3, policy: b64(POLICY) },
          }),
        ),
      ).toMatchObject({ name: n3, policy: POLICY })

      const read = groupOf(await t.api.get(`/v1/groups/${g.id}`, { auth: admin }))
      expect(read).toEqual({ id: g.id, group_id: g.id, name: n3, policy: POLICY })
    })

    it('rejects a bad operation, a malformed id and a bad base64 policy with 400', async () => {
      const u = await makeUser()
      const g = await makeGroup({ policy: POLICY })
      expectError(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          form: { operation: 'ADD', user_ids: u.id },
        }),
        400,
        /^operation\b/,
      )
      expectError(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          multipart: { operation: 'APPEND', user_ids: `${u.id},nope` },
        }),
        400,
        /user_ids/,
      )
      expectError(
        await t.api.put(`/v1/groups/${g.id}`, {
          auth: admin,
          form: { policy: 'definitely not base64!' },
        }),
        400,
        /^policy\b/,
      )
      expect(await members(g.id)).toEqual([])
      const read = groupOf(await t.api.get(`/v1/groups/${g.id}`, { auth: admin }))
      expect(read.policy).toEqual(POLICY)
    })

    it('404 for an unknown group', async () => {
      const res = await t.api.put(`/v1/groups/${randomUUID()}`, {
        auth: admin,
        form: { name: uniqueName() },
      })
      expectError(res, 404)
    })
  })

  describe('POST /v1/groups/{group_id}/membership', () => {
    it('adds users from a JSON user_ids array', async () => {
      const [u1, u2, u3] = [await makeUser(), await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id] })
      const res = await t.api.post(`/v1/groups/${g.id}/membership`, {
        auth: admin,
        json: { user_ids: [u2.id, u3.id, u1.id] },
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json()).toEqual({ result: 'success', transaction_id: expect.any(String) })
      expect(await members(g.id)).toEqual([u1.id, u2.id, u3.id].sort())
      expect(await groupIdsOfUser(u2.id)).toEqual([g.id])
    })

    it('404 and nothing changes when any user is unknown', async () => {
      const [u1, u2] = [await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id] })
      const res = await t.api.post(`/v1/groups/${g.id}/membership`, {
        auth: admin,
        json: { user_ids: [u2.id, randomUUID()] },
      })
      expectError(res, 404)
      expect(await members(g.id)).toEqual([u1.id])
    })

    it('404 for a DEACTIVATED user', async () => {
      const u = await makeUser()
      expect((await t.api.delete(`/v1/users/${u.id}`, { auth: admin })).statusCode).toBe(200)
      const g = await makeGroup()
      expectError(
        await t.api.post(`/v1/groups/${g.id}/membership`, {
          auth: admin,
          json: { user_ids: [u.id] },
        }),
        404,
      )
      expect(await members(g.id)).toEqual([])
    })

    it('400 for an empty, missing or malformed user_ids; 404 for an unknown group', async () => {
      const u = await makeUser()
      const g = await makeGroup()
      const post = (json?: unknown) =>
        t.api.post(`/v1/groups/${g.id}/membership`, {
          auth: admin,
          ...(json === undefined ? {} : { json }),
        })
      expectError(await post({ user_ids: [] }), 400, /user_ids/)
      expectError(await post({}), 400, /user_ids/)
      expectError(await post(), 400)
      expectError(await post({ user_ids: ['not-a-uuid'] }), 400, /user_ids/)
      expect(await members(g.id)).toEqual([])
      expectError(
        await t.api.post(`/v1/groups/${randomUUID()}/membership`, {
          auth: admin,
          json: { user_ids: [u.id] },
        }),
        404,
      )
    })

    it('needs U on the group or C on every Group::G::GroupMembership::<user>', async () => {
      const [u1, u2] = [await makeUser(), await makeUser()]
      const g = await makeGroup()
      const add = (auth: string, ids: string[]) =>
        t.api.post(`/v1/groups/${g.id}/membership`, { auth, json: { user_ids: ids } })

      const neither = await makeUser([
        { Resources: [`Group::${g.id}`], Activities: 'RD' },
        { Resources: [`Group::${g.id}::GroupMembership::.*`], Activities: 'D' },
      ])
      expect(expectError(await add(neither.apiKey, [u1.id]), 401).type).toBe('authorization_error')

      const onlyU1 = await makeUser([
        { Resources: [`Group::${g.id}::GroupMembership::${u1.id}`], Activities: 'C' },
      ])
      expectError(await add(onlyU1.apiKey, [u1.id, u2.id]), 401)
      expect(await members(g.id)).toEqual([])
      expect((await add(onlyU1.apiKey, [u1.id])).statusCode).toBe(200)
      expect(await members(g.id)).toEqual([u1.id])

      const both = await makeUser([
        {
          Resources: [
            `Group::${g.id}::GroupMembership::${u1.id}`,
            `Group::${g.id}::GroupMembership::${u2.id}`,
          ],
          Activities: 'C',
        },
      ])
      expect((await add(both.accessToken, [u1.id, u2.id])).statusCode).toBe(200)
      expect(await members(g.id)).toEqual([u1.id, u2.id].sort())

      const other = await makeGroup()
      const otherAdd = await t.api.post(`/v1/groups/${other.id}/membership`, {
        auth: both.apiKey,
        json: { user_ids: [u1.id] },
      })
      expectError(otherAdd, 401)

      const viaUpdate = await makeUser([{ Resources: [`Group::${other.id}`], Activities: 'U' }])
      const res = await t.api.post(`/v1/groups/${other.id}/membership`, {
        auth: viaUpdate.apiKey,
        json: { user_ids: [u1.id, u2.id] },
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(await members(other.id)).toEqual([u1.id, u2.id].sort())
    })
  })

  describe('DELETE /v1/groups/{group_id}/membership/{user_ids}', () => {
    it('removes a comma-separated list of members', async () => {
      const [u1, u2, u3] = [await makeUser(), await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id, u2.id, u3.id] })
      const res = await t.api.delete(`/v1/groups/${g.id}/membership/${u1.id},${u3.id}`, {
        auth: admin,
        headers: { 'content-type': 'application/json' },
      })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json()).toEqual({ result: 'success', transaction_id: expect.any(String) })
      expect(await members(g.id)).toEqual([u2.id])
      expect(await groupIdsOfUser(u1.id)).toEqual([])
    })

    it('404 and nothing changes unless every user is a member', async () => {
      const [u1, u2] = [await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id] })
      expectError(
        await t.api.delete(`/v1/groups/${g.id}/membership/${u1.id},${u2.id}`, { auth: admin }),
        404,
      )
      expectError(
        await t.api.delete(`/v1/groups/${g.id}/membership/${randomUUID()}`, { auth: admin }),
        404,
      )
      expect(await members(g.id)).toEqual([u1.id])
      expectError(
        await t.api.delete(`/v1/groups/${randomUUID()}/membership/${u1.id}`, { auth: admin }),
        404,
      )
    })

    it('400 for a malformed user id or group id', async () => {
      const u = await makeUser()
      const g = await makeGroup({ userIds: [u.id] })
      expectError(
        await t.api.delete(`/v1/groups/${g.id}/membership/${u.id},not-a-uuid`, { auth: admin }),
        400,
        /user_ids/,
      )
      expectError(await t.api.delete(`/v1/groups/${g.id}/membership/,`, { auth: admin }), 400)
      expectError(
        await t.api.delete(`/v1/groups/not-a-uuid/membership/${u.id}`, { auth: admin }),
        400,
      )
      expect(await members(g.id)).toEqual([u.id])
    })

    it('needs U on the group or D on every membership', async () => {
      const [u1, u2, u3] = [await makeUser(), await makeUser(), await makeUser()]
      const g = await makeGroup({ userIds: [u1.id, u2.id, u3.id] })
      const remove = (auth: string, ids: string[]) =>
        t.api.delete(`/v1/groups/${g.id}/membership/${ids.join(',')}`, { auth })

      const neither = await makeUser([
        { Resources: [`Group::${g.id}`], Activities: 'CRD' },
        { Resources: [`Group::${g.id}::GroupMembership::.*`], Activities: 'C' },
      ])
      expect(expectError(await remove(neither.apiKey, [u1.id]), 401).type).toBe(
        'authorization_error',
      )

      const onlyU1 = await makeUser([
        { Resources: [`Group::${g.id}::GroupMembership::${u1.id}`], Activities: 'D' },
      ])
      expectError(await remove(onlyU1.apiKey, [u1.id, u2.id]), 401)
      expect(await members(g.id)).toEqual([u1.id, u2.id, u3.id].sort())
      expect((await remove(onlyU1.apiKey, [u1.id])).statusCode).toBe(200)
      expect(await members(g.id)).toEqual([u2.id, u3.id].sort())

      const both = await makeUser([
        { Resources: [`Group::${g.id}::GroupMembership::.*`], Activities: 'D' },
      ])
      expect((await remove(both.accessToken, [u2.id])).statusCode).toBe(200)

      const viaUpdate = await makeUser([{ Resources: [`Group::${g.id}`], Activities: 'U' }])
      expect((await remove(viaUpdate.apiKey, [u3.id])).statusCode).toBe(200)
      expect(await members(g.id)).toEqual([])
    })
  })

  describe('DELETE /v1/groups/{group_id}', () => {
    it('returns the group without user_ids and detaches its members', async () => {
      const member = await makeUser()
      const g = await makeGroup({ policy: READ_GROUPS, userIds: [member.id] })
      const keep = await makeGroup({ userIds: [member.id] })
      expect((await t.api.get(`/v1/groups/${keep.id}`, { auth: member.apiKey })).statusCode).toBe(
        200,
      )
      expect((await groupIdsOfUser(member.id)).sort()).toEqual([g.id, keep.id].sort())

      const deleted = groupOf(await t.api.delete(`/v1/groups/${g.id}`, { auth: admin }))
      expect(deleted).toEqual({ id: g.id, group_id: g.id, name: g.name, policy: READ_GROUPS })

      expect(await groupIdsOfUser(member.id)).toEqual([keep.id])
      // The deleted group's policy no longer applies, on the very next request.
      const denied = await t.api.get(`/v1/groups/${keep.id}`, { auth: member.apiKey })
      expect(expectError(denied, 401).type).toBe('authorization_error')

      expectError(await t.api.get(`/v1/groups/${g.id}`, { auth: admin }), 404)
      expectError(await t.api.delete(`/v1/groups/${g.id}`, { auth: admin }), 404)
      expectError(
        await t.api.put(`/v1/groups/${g.id}`, { auth: admin, json: { name: uniqueName() } }),
        404,
      )
      expectError(
        await t.api.post(`/v1/groups/${g.id}/membership`, {
          auth: admin,
          json: { user_ids: [member.id] },
        }),
        404,
      )
      expect(await groupNames()).not.toContain(g.name)

      // The name is free again.
      const again = groupOf(await t.api.post('/v1/groups', { auth: admin, form: { name: g.name } }))
      expect(again.id).not.toBe(g.id)
      expect(again.user_ids).toEqual([])
    })

    it('404 for an unknown group, 400 for a malformed id', async () => {
      expectError(await t.api.delete(`/v1/groups/${randomUUID()}`, { auth: admin }), 404)
      expectError(await t.api.delete('/v1/groups/xyz', { auth: admin }), 400)
    })
  })

  describe('concurrency', () => {
    it('30 concurrent JSON APPENDs of distinct users all land', async () => {
      const users: string[] = []
      for (let i = 0; i < 30; i++) users.push((await makeUser()).id)
      const g = await makeGroup()
      const results = await Promise.all(
        users.map((id) =>
          t.api.put(`/v1/groups/${g.id}`, {
            auth: admin,
            json: { user_ids: [id], user_operation: 'APPEND' },
          }),
        ),
      )
      for (const res of results) expect(res.statusCode, res.body).toBe(200)
      expect(await members(g.id)).toEqual([...users].sort())
    })

    it('30 concurrent membership adds of distinct users all land', async () => {
      const users: string[] = []
      for (let i = 0; i < 30; i++) users.push((await makeUser()).id)
      const g = await makeGroup()
      const results = await Promise.all(
        users.map((id) =>
          t.api.post(`/v1/groups/${g.id}/membership`, { auth: admin, json: { user_ids: [id] } }),
        ),
      )
      for (const res of results) expect(res.statusCode, res.body).toBe(200)
      expect(await members(g.id)).toEqual([...users].sort())
    })
  })
})
