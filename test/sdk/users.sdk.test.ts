import type TrueVaultClient from 'truevault'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import {
  expectApiError,
  expectUserShape,
  sdkError,
  sdkFor,
  TRANSPORTS,
  UUID,
  uniqueName,
} from './support.js'

/** The SDK suite's `userSchemaWithUsername`: id (uuid) and username required. */
function expectIdAndUsername(user: TrueVaultClient.User): void {
  expect(user.id).toMatch(UUID)
  expect(typeof user.username).toBe('string')
}

/**
 * Mirrors the official SDK suite's "users → works" (all but the user schema and user search,
 * which Coffer does not serve yet), one step per case, plus the effects the suite does not check.
 */
describe.each(TRANSPORTS)('official SDK (%s): users', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  let server: TestServer
  let admin: TrueVaultClient
  const login = (username: string, password: string) =>
    TrueVaultClient.login(server.admin.account_id, username, password, undefined, server.url)

  // The suite's two users: `newUser` (ACTIVATED) and `pending`.
  let newUser: TrueVaultClient.User
  let newUserPassword: string
  let pending: TrueVaultClient.User

  beforeAll(async () => {
    server = await startTestServer()
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
  })
  afterAll(() => server?.close())

  it('createUser returns the user with an API key and an access token', async () => {
    const username = uniqueName()
    newUserPassword = uniqueName()
    newUser = await admin.createUser(username, newUserPassword)
    expectIdAndUsername(newUser)
    expectUserShape(newUser)
    expect(newUser).toMatchObject({
      id: expect.stringMatching(UUID),
      user_id: newUser.id,
      account_id: server.admin.account_id,
      username,
      status: 'ACTIVATED',
      mfa_enrolled: false,
      api_key: expect.any(String),
      access_token: expect.any(String),
    })
    // Both vended credentials work with the SDK.
    for (const authn of [
      { apiKey: newUser.api_key as string },
      { accessToken: newUser.access_token as string },
    ]) {
      expect((await new TrueVaultClient(authn, server.url).readCurrentUser(false)).id).toBe(
        newUser.id,
      )
    }
  })

  it('createUser with attributes {}, groups [] and status PENDING', async () => {
    pending = await admin.createUser(uniqueName(), uniqueName(), {}, [], 'PENDING')
    expectIdAndUsername(pending)
    expect(pending.status).toBe('PENDING')
  })

  it('createUser with attributes and groups keeps both', async () => {
    const group = await admin.createGroup(uniqueName(), [])
    const attributes = { name: 'Ada', tags: ['x'], nested: { n: 1 } }
    const user = await admin.createUser(uniqueName(), uniqueName(), attributes, [group.id])
    const read = await admin.readUser(user.id)
    expect(read.attributes).toEqual(attributes)
    expect(read.group_ids).toEqual([group.id])
  })

  it('createUser refuses a username already taken', async () => {
    expectApiError(await sdkError(admin.createUser(newUser.username, uniqueName())))
  })

  it('listUsers(false): items have id and username, no attributes', async () => {
    const users = await admin.listUsers(false)
    expect(users.length).toBeGreaterThan(0)
    for (const u of users) {
      expectIdAndUsername(u)
      expect(u).not.toHaveProperty('attributes')
    }
    expect(users.map((u) => u.id)).toEqual(
      expect.arrayContaining([newUser.id, server.admin.userId]),
    )
    // The SDK's default (`listUsers()`) is the same non-full list.
    expect((await admin.listUsers()).map((u) => u.id).sort()).toEqual(users.map((u) => u.id).sort())
  })

  it('listUsers(true): attributes are decoded objects', async () => {
    const users = await admin.listUsers(true)
    expect(typeof users[0]?.attributes).toBe('object')
    const listed = users.find((u) => u.id === newUser.id)
    expect(listed?.attributes).toEqual({})
    expect(listed?.group_ids).toEqual([])
  })

  it("listUsersWithStatus('PENDING', false) lists the pending user without attributes", async () => {
    const users = await admin.listUsersWithStatus('PENDING', false)
    const found = users.find((u) => u.id === pending.id)
    expect(found?.id).toBe(pending.id)
    expect(found).not.toHaveProperty('attributes')
    for (const u of users) expect(u.status).toBe('PENDING')

    const full = await admin.listUsersWithStatus('PENDING', true)
    expect(full.find((u) => u.id === pending.id)?.attributes).toEqual({})
  })

  it('readUser and readUsers (v2) return users with plain JSON attributes', async () => {
    const one = await admin.readUser(newUser.id)
    expectIdAndUsername(one)
    expectUserShape(one)
    expect(one).toMatchObject({ id: newUser.id, username: newUser.username, attributes: {} })

    const many = await admin.readUsers([newUser.id, pending.id])
    for (const u of many) expectIdAndUsername(u)
    expect(many.map((u) => u.id)).toEqual([newUser.id, pending.id])
    expect(many[1]?.status).toBe('PENDING')

    // An unknown id fails the whole read with a standard error.
    expectApiError(await sdkError(admin.readUser('00000000-0000-4000-8000-000000000000')))
  })

  it('updateUserAttributes replaces the attributes', async () => {
    const value = uniqueName()
    const updated = await admin.updateUserAttributes(newUser.id, { foo: value })
    expectIdAndUsername(updated)
    expect(updated.id).toBe(newUser.id)
    expect((await admin.readUser(newUser.id)).attributes).toEqual({ foo: value })
    const listed = (await admin.listUsers(true)).find((u) => u.id === newUser.id)
    expect(listed?.attributes).toEqual({ foo: value })
  })

  it('createUserAccessToken vends a working token', async () => {
    const token = await admin.createUserAccessToken(newUser.id)
    expect(typeof token).toBe('string')
    const asUser = new TrueVaultClient({ accessToken: token }, server.url)
    expect((await asUser.readCurrentUser()).attributes).toEqual({ foo: expect.any(String) })
  })

  it('createUserAccessToken with notValidAfter (sent as "not_valid_after ")', async () => {
    const token = await admin.createUserAccessToken(newUser.id, new Date(Date.now() + 60 * 60_000))
    expect(typeof token).toBe('string')
    const asUser = new TrueVaultClient({ accessToken: token }, server.url)
    expect((await asUser.readCurrentUser(false)).id).toBe(newUser.id)
    // The field is read despite its trailing space: a past expiry is refused.
    expectApiError(
      await sdkError(admin.createUserAccessToken(newUser.id, new Date(Date.now() - 60_000))),
    )
  })

  it('createUserApiKey replaces the API key', async () => {
    const oldKey = newUser.api_key as string
    const key = await admin.createUserApiKey(newUser.id)
    expect(typeof key).toBe('string')
    expect(key).not.toBe(oldKey)
    const withNew = new TrueVaultClient({ apiKey: key }, server.url)
    expect((await withNew.readCurrentUser(false)).id).toBe(newUser.id)
    const withOld = new TrueVaultClient({ apiKey: oldKey }, server.url)
    expectApiError(await sdkError(withOld.readCurrentUser(false)))
  })

  it('updateUserPassword: the new password logs in, the old one does not', async () => {
    const updated = await admin.updateUserPassword(newUser.id, 'a new passphrase 2')
    expectIdAndUsername(updated)
    expect(updated.id).toBe(newUser.id)
    const client = await login(newUser.username, 'a new passphrase 2')
    expect((await client.readCurrentUser(false)).id).toBe(newUser.id)
    expectApiError(await sdkError(login(newUser.username, newUserPassword)))
  })

  it("updateUserStatus('PENDING')", async () => {
    const updated = await admin.updateUserStatus(newUser.id, 'PENDING')
    expectIdAndUsername(updated)
    expect(updated.status).toBe('PENDING')
    const pendingIds = (await admin.listUsersWithStatus('PENDING')).map((u) => u.id)
    expect(pendingIds).toContain(newUser.id)
  })

  it('updateUserUsername', async () => {
    const username = uniqueName()
    const updated = await admin.updateUserUsername(newUser.id, username)
    expectIdAndUsername(updated)
    expect(updated).toMatchObject({ id: newUser.id, username })
    expect((await admin.readUser(newUser.id)).username).toBe(username)
    newUser = { ...newUser, username }
  })

  it('deleteUser deactivates the user and kills its credentials', async () => {
    const apiKey = await admin.createUserApiKey(newUser.id)
    const deleted = await admin.deleteUser(newUser.id)
    expectIdAndUsername(deleted)
    expect(deleted).toMatchObject({
      id: newUser.id,
      username: newUser.username,
      status: 'DEACTIVATED',
    })
    // Nothing is purged: the user is still readable, as DEACTIVATED.
    expect((await admin.readUser(newUser.id)).status).toBe('DEACTIVATED')
    expect((await admin.listUsersWithStatus('PENDING')).map((u) => u.id)).not.toContain(newUser.id)
    expect((await admin.listUsersWithStatus('DEACTIVATED')).map((u) => u.id)).toContain(newUser.id)
    const withKey = new TrueVaultClient({ apiKey }, server.url)
    expectApiError(await sdkError(withKey.readCurrentUser(false)))
    // There is nothing left to delete.
    expectApiError(await sdkError(admin.deleteUser(newUser.id)))
  })

  it('updateCurrentUser(null) on the admin reads back null', async () => {
    const updated = await admin.updateCurrentUser(null)
    expectUserShape(updated)
    expect((await admin.readCurrentUser()).attributes).toBeNull()
  })

  it('createUserAccessToken with notValidAfter: the token dies at that time', async () => {
    const clock = new ManualClock(new Date())
    const timed = await startTestServer({ clock })
    try {
      const sdkAdmin = new TrueVaultClient({ apiKey: timed.admin.api_key }, timed.url)
      const user = await sdkAdmin.createUser(uniqueName(), uniqueName())
      const short = await sdkAdmin.createUserAccessToken(
        user.id,
        new Date(clock.now().getTime() + 5 * 60_000),
      )
      const standard = await sdkAdmin.createUserAccessToken(user.id)
      const as = (token: string) => new TrueVaultClient({ accessToken: token }, timed.url)
      expect((await as(short).readCurrentUser(false)).id).toBe(user.id)

      clock.advance(6 * 60_000)
      expectApiError(await sdkError(as(short).readCurrentUser(false)))
      expect((await as(standard).readCurrentUser(false)).id).toBe(user.id)
    } finally {
      await timed.close()
    }
  })
})
