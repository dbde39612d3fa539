import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectApiError, sdkError, sdkFor, TRANSPORTS, UUID, uniqueName } from './support.js'

/** The SDK suite's SAT schema: all five fields required. */
function expectSatShape(sat: Record<string, unknown>): void {
  expect(sat.allowed_uses === null || typeof sat.allowed_uses === 'number').toBe(true)
  expect(typeof sat.consumed_uses).toBe('number')
  expect(typeof sat.name).toBe('string')
  expect(typeof sat.not_valid_after).toBe('string')
  expect(Array.isArray(sat.policy)).toBe(true)
}

/** Mirrors the official SDK suite's "scoped access tokens → works", plus a SAT minting a SAT. */
describe.each(TRANSPORTS)('official SDK (%s): scoped access tokens', (transport) => {
  const Sdk = sdkFor(transport)
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.close())

  it('works', async () => {
    const admin = new Sdk({ apiKey: server.admin.api_key }, server.url)
    const vault = await admin.createVault(uniqueName())
    const name = uniqueName()
    const policy = [{ Resources: [`Vault::${vault.id}`], Activities: 'R' }]
    const notValidAfter = new Date(Date.now() + 10_000)
    const sat = await admin.createScopedAccessToken(name, policy, notValidAfter, 33)
    expect(sat.name).toBe(name)
    expect(sat.policy).toEqual(policy)
    expect(sat.not_valid_after).toBe(notValidAfter.toISOString())
    expect(sat.allowed_uses).toBe(33)
    expect(sat.id).toMatch(UUID)
    const auth = sat.http_auth as { username: string; password: string }
    expect(auth.username).toBe(`sat-${sat.id}`)

    const satClient = new Sdk(
      { httpBasic: Buffer.from(`${auth.username}:${auth.password}`).toString('base64') },
      server.url,
    )
    expect((await satClient.readVault(vault.id)).id).toBe(vault.id)

    const list = await admin.listScopedAccessTokens()
    for (const item of list) {
      expectSatShape(item as unknown as Record<string, unknown>)
      expect(item).not.toHaveProperty('http_auth')
    }
    expect(list.map((s) => s.id)).toContain(sat.id)
    const read = await admin.getScopedAccessToken(sat.id)
    expectSatShape(read as unknown as Record<string, unknown>)
    expect(read.consumed_uses).toBe(1)

    await admin.deleteScopedAccessToken(sat.id)
    expectApiError(await sdkError(satClient.readVault(vault.id)))
  })

  it('lets a SAT mint a narrower SAT, and without a use limit', async () => {
    const admin = new Sdk({ apiKey: server.admin.api_key }, server.url)
    const vault = await admin.createVault(uniqueName())
    const parent = await admin.createScopedAccessToken(
      uniqueName(),
      [
        { Resources: ['Vault::.*'], Activities: 'CR' },
        // A SAT mints only when its own policy says so (decision 50).
        { Resources: ['ScopedAccessToken::'], Activities: 'C' },
      ],
      new Date(Date.now() + 60_000),
    )
    expect(parent.allowed_uses).toBeNull()
    const pa = parent.http_auth as { username: string; password: string }
    const parentClient = new Sdk(
      { httpBasic: Buffer.from(`${pa.username}:${pa.password}`).toString('base64') },
      server.url,
    )
    const child = await parentClient.createScopedAccessToken(
      uniqueName(),
      [{ Resources: ['Vault::.*'], Activities: 'CRUD' }],
      new Date(Date.now() + 60_000),
      1,
    )
    const ca = child.http_auth as { username: string; password: string }
    const childClient = new Sdk(
      { httpBasic: Buffer.from(`${ca.username}:${ca.password}`).toString('base64') },
      server.url,
    )
    // Bounded by the parent's C/R: deleting the vault is refused (and takes no use).
    expectApiError(await sdkError(childClient.deleteVault(vault.id)))
    expect((await childClient.readVault(vault.id)).id).toBe(vault.id)
    expectApiError(await sdkError(childClient.readVault(vault.id)))
    expect((await parentClient.listScopedAccessTokens()).map((s) => s.id)).toEqual([child.id])
  })
})
