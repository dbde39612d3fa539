import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
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

/** The URL and headers of one request the SDK sends to a bare socket that answers `{}`. */
async function requestSentBy(send: (url: string) => Promise<unknown>) {
  let seen: { url?: string; headers?: IncomingHttpHeaders } = {}
  const raw = createServer((req, res) => {
    seen = { url: req.url, headers: req.headers }
    req.resume()
    req.on('end', () => res.end('{}'))
  })
  await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve))
  try {
    await send(`http://127.0.0.1:${(raw.address() as AddressInfo).port}`)
  } finally {
    await new Promise((resolve) => raw.close(resolve))
  }
  return seen
}

describe('official SDK: transports under test', () => {
  it('the second copy really uses node-fetch + form-data', async () => {
    const native = await requestSentBy((url) =>
      new (sdkFor('global fetch'))(null, url).createGroup('g', []),
    )
    const legacy = await requestSentBy((url) =>
      new (sdkFor('node-fetch + form-data'))(null, url).createGroup('g', []),
    )
    expect(native.headers?.['user-agent']).not.toMatch(/node-fetch/)
    expect(legacy.headers?.['user-agent']).toMatch(/^node-fetch/)
    for (const sent of [native, legacy]) {
      expect(sent.url).toBe('/v1/groups?_tv_sdk=1.3.1')
      expect(sent.headers?.['content-type']).toMatch(/^multipart\/form-data; ?boundary=/)
    }
  })
})

/** Mirrors the official SDK suite's login, error handling and readCurrentUser cases. */
describe.each(TRANSPORTS)('official SDK (%s): authentication', (transport) => {
  const TrueVaultClient = sdkFor(transport)
  let server: TestServer
  let admin: TrueVaultClient

  beforeAll(async () => {
    server = await startTestServer()
    admin = new TrueVaultClient({ apiKey: server.admin.api_key }, server.url)
  })
  afterAll(() => server?.close())

  it('login → works', async () => {
    const username = uniqueName()
    const password = 'testpassword'
    const created = await admin.createUser(username, password)

    const client = await TrueVaultClient.login(
      server.admin.account_id,
      username,
      password,
      undefined,
      server.url,
    )
    expect(client.accessToken).toMatch(/[a-z0-9.-]+/)
    expect(client.accessToken).not.toBe(created.access_token)

    const slim = await client.readCurrentUser(false)
    expectUserShape(slim)
    expect(slim).not.toHaveProperty('attributes')
    expect(slim).toMatchObject({ id: created.id, username, status: 'ACTIVATED' })

    // A user created without attributes reads back as {} (base64 of "{}"), not null.
    const full = await client.readCurrentUser()
    expectUserShape(full)
    expect(full.attributes).toEqual({})

    const updated = await client.updateCurrentUser({ a: 1 })
    expectUserShape(updated)
    expect(updated.attributes).toEqual({ a: 1 })
    expect((await client.readCurrentUser()).attributes).toEqual({ a: 1 })

    const cleared = await client.updateCurrentUser(null)
    expectUserShape(cleared)
    expect(cleared.attributes).toBeNull()
    expect((await client.readCurrentUser()).attributes).toBeNull()

    const token = client.accessToken
    const loggedOut = await client.logout()
    expectUserShape(loggedOut)
    expect(loggedOut).toMatchObject({
      id: created.id,
      account_id: server.admin.account_id,
      username,
      status: 'ACTIVATED',
      mfa_enrolled: false,
    })
    expect(client.authHeader).toBeNull()

    // The token used is dead; the user's other credentials are not.
    const stale = new TrueVaultClient({ accessToken: token }, server.url)
    expectApiError(await sdkError(stale.readCurrentUser()))
    expectApiError(await sdkError(stale.logout()))
    const withKey = new TrueVaultClient({ apiKey: created.api_key as string }, server.url)
    expect((await withKey.readCurrentUser(false)).id).toBe(created.id)
  })

  it('error handling → works', async () => {
    const e = await sdkError(
      TrueVaultClient.login(server.admin.account_id, 'invalid', 'invalid', undefined, server.url),
    )
    expectApiError(e)

    // Same answer for an account that does not exist and for a wrong password.
    expectApiError(
      await sdkError(
        TrueVaultClient.login(
          '00000000-0000-4000-8000-000000000000',
          'invalid',
          'invalid',
          undefined,
          server.url,
        ),
      ),
    )
    const wrongPassword = await sdkError(
      TrueVaultClient.login(
        server.admin.account_id,
        server.admin.username,
        'not-the-password',
        undefined,
        server.url,
      ),
    )
    expectApiError(wrongPassword)
    expect(wrongPassword.error).toEqual({ ...e.error })

    // Unknown credentials on an authenticated endpoint give the same envelope.
    const nobody = new TrueVaultClient({ apiKey: 'not-a-key' }, server.url)
    expectApiError(await sdkError(nobody.readCurrentUser()))
    expectApiError(await sdkError(new TrueVaultClient(null, server.url).listUsers()))
  })

  it('readCurrentUser → returns current user', async () => {
    const me = await admin.readCurrentUser()
    expectUserShape(me)
    expect(me).toMatchObject({
      id: server.admin.userId,
      account_id: server.admin.account_id,
      username: server.admin.username,
      status: 'ACTIVATED',
      mfa_enrolled: false,
    })
    expect(me.attributes === null || typeof me.attributes === 'object').toBe(true)
    expect(me.group_ids).toEqual([expect.stringMatching(UUID)])

    const slim = await admin.readCurrentUser(false)
    expect(slim).not.toHaveProperty('attributes')
    expect(slim.id).toBe(server.admin.userId)
  })

  it('login with notValidAfter → works', async () => {
    const username = uniqueName()
    await admin.createUser(username, 'testpassword')
    const client = await TrueVaultClient.login(
      server.admin.account_id,
      username,
      'testpassword',
      undefined,
      server.url,
      new Date(Date.now() + 10 * 60_000),
    )
    expect((await client.readCurrentUser(false)).username).toBe(username)

    // An expiry in the past is refused with a standard error.
    expectApiError(
      await sdkError(
        TrueVaultClient.login(
          server.admin.account_id,
          username,
          'testpassword',
          undefined,
          server.url,
          new Date(Date.now() - 60_000),
        ),
      ),
    )
  })

  it('login with notValidAfter → the token stops working at that time', async () => {
    const clock = new ManualClock(new Date())
    const timed = await startTestServer({ clock })
    try {
      const sdkAdmin = new TrueVaultClient({ apiKey: timed.admin.api_key }, timed.url)
      const username = uniqueName()
      await sdkAdmin.createUser(username, 'testpassword')
      const login = (notValidAfter?: Date) =>
        TrueVaultClient.login(
          timed.admin.account_id,
          username,
          'testpassword',
          undefined,
          timed.url,
          notValidAfter,
        )
      const short = await login(new Date(clock.now().getTime() + 10 * 60_000))
      const standard = await login()
      expect((await short.readCurrentUser(false)).username).toBe(username)

      clock.advance(11 * 60_000)
      expectApiError(await sdkError(short.readCurrentUser(false)))
      // The default lifetime (24 hours) is untouched by the other token's expiry.
      expect((await standard.readCurrentUser(false)).username).toBe(username)
    } finally {
      await timed.close()
    }
  })
})
