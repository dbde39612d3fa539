import type TrueVaultClient from 'truevault'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestServer } from '../helpers/server.js'
import {
  expectApiError,
  expectGroupShape,
  sdkError,
  sdkFor,
  TRANSPORTS,
  UUID,
  uniqueName,
} from './support.js'

/** Mirrors the official SDK suite's "groups → works", one step per case, plus policy effects. */
describe.each(TRANSPORTS)('official SDK (%s): groups', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  let server: TestServer
  let admin: TrueVaultClient

  let group: TrueVaultClient.Group
  let member: TrueVaultClient.User
  const policy: TrueVaultClient.PolicyStatement[] = [
    { Resources: ['Vault::.*', 'Vault::.*::Document::.*'], Activities: 'CRUD' },
    { Resources: ['User::.*'], Activities: 'R' },
  ]

  beforeAll(async () => {
    server = await startTestServer()
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
    member = await admin.createUser(uniqueName(), uniqueName())
  })
  afterAll(() => server?.close())

  const membersOf = async (id: string) => (await admin.readFullGroup(id)).user_ids

  it('createGroup with an empty policy', async () => {
    const name = uniqueName()
    group = await admin.createGroup(name, [])
    expectGroupShape(group)
    expect(group).toMatchObject({ id: expect.stringMatching(UUID), name, policy: [] })
    expect(group.group_id).toBe(group.id)
  })

  it('createGroup with a real policy and members', async () => {
    const name = uniqueName()
    const created = await admin.createGroup(name, policy, [member.id])
    expectGroupShape(created)
    expect(created).toMatchObject({ name, policy, user_ids: [member.id] })
    expect(await admin.readFullGroup(created.id)).toMatchObject({ policy, user_ids: [member.id] })
  })

  it('createGroup refuses a name already used', async () => {
    expectApiError(await sdkError(admin.createGroup(group.name, [])))
  })

  it('readFullGroup includes the member ids', async () => {
    const full = await admin.readFullGroup(group.id)
    expectGroupShape(full)
    expect(full).toMatchObject({ id: group.id, name: group.name, policy: [], user_ids: [] })
    expectApiError(await sdkError(admin.readFullGroup('00000000-0000-4000-8000-000000000000')))
  })

  it('updateGroup: new name with an empty policy, then a policy alone', async () => {
    const name = uniqueName()
    const renamed = await admin.updateGroup(group.id, name, [])
    expectGroupShape(renamed)
    expect(renamed).toMatchObject({ id: group.id, name, policy: [] })

    // The SDK leaves out a missing name: only the policy changes.
    const withPolicy = await admin.updateGroup(group.id, undefined, policy)
    expectGroupShape(withPolicy)
    expect(withPolicy).toMatchObject({ id: group.id, name, policy })
    expect(await admin.readFullGroup(group.id)).toMatchObject({ name, policy })
    group = withPolicy
  })

  it('listGroups: every group matches the shape', async () => {
    const groups = await admin.listGroups()
    expect(groups.length).toBeGreaterThanOrEqual(3)
    for (const g of groups) expectGroupShape(g)
    expect(groups.map((g) => g.name)).toContain('FULL_ADMIN')
    expect(groups.find((g) => g.id === group.id)).toMatchObject({ name: group.name, policy })
  })

  it('addUsersToGroup / removeUsersFromGroup (JSON membership) return nothing', async () => {
    expect(await admin.addUsersToGroup(group.id, [member.id])).toBeUndefined()
    expect(await membersOf(group.id)).toEqual([member.id])
    expect((await admin.readUser(member.id)).group_ids).toContain(group.id)

    expect(await admin.removeUsersFromGroup(group.id, [member.id])).toBeUndefined()
    expect(await membersOf(group.id)).toEqual([])

    // Strict: removing a non-member and adding an unknown user fail and change nothing.
    expectApiError(await sdkError(admin.removeUsersFromGroup(group.id, [member.id])))
    expectApiError(
      await sdkError(
        admin.addUsersToGroup(group.id, [member.id, '00000000-0000-4000-8000-000000000000']),
      ),
    )
    expect(await membersOf(group.id)).toEqual([])
  })

  it('addUsersToGroupReturnUserIds / removeUsersFromGroupReturnUserIds (form APPEND/REMOVE)', async () => {
    const other = await admin.createUser(uniqueName(), uniqueName())
    const added = await admin.addUsersToGroupReturnUserIds(group.id, [member.id, other.id])
    expectGroupShape(added)
    expect(added).toMatchObject({ id: group.id, name: group.name, policy })
    expect([...(added.user_ids ?? [])].sort()).toEqual([member.id, other.id].sort())

    const removed = await admin.removeUsersFromGroupReturnUserIds(group.id, [member.id])
    expectGroupShape(removed)
    expect(removed).toMatchObject({ id: group.id, user_ids: [other.id] })
    expect(await membersOf(group.id)).toEqual([other.id])
  })

  it('deleteGroup returns the group, which is then gone', async () => {
    const deleted = await admin.deleteGroup(group.id)
    expectGroupShape(deleted)
    expect(deleted).toMatchObject({ id: group.id, name: group.name, policy })
    expectApiError(await sdkError(admin.readFullGroup(group.id)))
    expect((await admin.listGroups()).map((g) => g.id)).not.toContain(group.id)
    expectApiError(await sdkError(admin.deleteGroup(group.id)))
  })

  it('a policy granting R on User::<id> lets a logged-in member read exactly that user', async () => {
    const password = 'testpassword'
    const reader = await admin.createUser(uniqueName(), password)
    const target = await admin.createUser(uniqueName(), uniqueName(), { secret: 'x' })
    const another = await admin.createUser(uniqueName(), uniqueName())
    await admin.createGroup(
      uniqueName(),
      [{ Resources: [`User::${target.id}`], Activities: 'R' }],
      [reader.id],
    )

    const client = await TrueVaultClient.login(
      server.admin.account_id,
      reader.username,
      password,
      undefined,
      server.url,
    )
    const read = await client.readUser(target.id)
    expect(read).toMatchObject({ id: target.id, username: target.username })
    expect(read.attributes).toEqual({ secret: 'x' })

    expectApiError(await sdkError(client.readUser(another.id)))
    expectApiError(await sdkError(client.readUsers([target.id, another.id])))
    expect((await client.listUsers()).map((u) => u.id)).toEqual([target.id])
    // R grants no update.
    expectApiError(await sdkError(client.updateUserAttributes(target.id, {})))
  })

  it('a member without any grant is refused everywhere with a standard error', async () => {
    const password = 'testpassword'
    const user = await admin.createUser(uniqueName(), password)
    const client = await TrueVaultClient.login(
      server.admin.account_id,
      user.username,
      password,
      undefined,
      server.url,
    )
    expectApiError(await sdkError(client.readUser(member.id)))
    expectApiError(await sdkError(client.listGroups()))
    expectApiError(await sdkError(client.createGroup(uniqueName(), [])))
    // Its own session still works.
    expect((await client.readCurrentUser(false)).id).toBe(user.id)
  })
})
