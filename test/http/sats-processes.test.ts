import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { basicHeader } from '../helpers/app.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from '../helpers/processes.js'
import { testDialect } from '../helpers/store.js'

type Sat = { id: string; consumed_uses: number; http_auth: { username: string; password: string } }

/**
 * Two `coffer serve` processes on one database (README, Operations: several nodes): a SAT's
 * `allowed_uses` holds across nodes because each use is one atomic conditional update.
 */
describe(`two server processes on one ${testDialect} database`, () => {
  let db: SharedDatabase
  const servers: ServerProcess[] = []
  let apiKey: string
  let vaultId: string

  beforeAll(async () => {
    db = await sharedDatabase()
    const firstDir = db.dataDir()
    // One after the other: the first migrates and bootstraps, the second finds both done.
    servers.push(await startServerProcess(db.env(firstDir)))
    servers.push(await startServerProcess(db.env(db.dataDir())))
    apiKey = bootstrapCredentials(firstDir).api_key
    const res = await fetch(`${servers[1]?.url}/v1/vaults`, {
      method: 'POST',
      headers: { authorization: basicHeader(apiKey), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'shared' }),
    })
    vaultId = ((await res.json()) as { vault: { id: string } }).vault.id
  }, 60_000)

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await db?.drop()
  })

  it('lets exactly 3 of 50 concurrent requests through with a 3-use SAT, every time', async () => {
    for (let round = 0; round < 5; round++) {
      const created = await fetch(`${servers[0]?.url}/v1/scoped_access_tokens`, {
        method: 'POST',
        headers: { authorization: basicHeader(apiKey), 'content-type': 'application/json' },
        body: JSON.stringify({
          name: `round ${round}`,
          policy: [{ Resources: [`Vault::${vaultId}`], Activities: 'R' }],
          not_valid_after: new Date(Date.now() + 600_000).toISOString(),
          allowed_uses: 3,
        }),
      })
      const sat = ((await created.json()) as { scoped_access_token: Sat }).scoped_access_token
      const auth = basicHeader(sat.http_auth.username, sat.http_auth.password)
      const statuses = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const server = servers[i % 2] as ServerProcess
          const res = await fetch(`${server.url}/v1/vaults/${vaultId}`, {
            headers: { authorization: auth },
          })
          await res.arrayBuffer()
          return res.status
        }),
      )
      expect(statuses.filter((s) => s === 200)).toHaveLength(3)
      expect(statuses.filter((s) => s === 401)).toHaveLength(47)
      const read = await fetch(`${servers[1]?.url}/v1/scoped_access_tokens/${sat.id}`, {
        headers: { authorization: basicHeader(apiKey) },
      })
      expect(
        ((await read.json()) as { scoped_access_token: Sat }).scoped_access_token.consumed_uses,
      ).toBe(3)
    }
  })
})
