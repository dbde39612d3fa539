import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { basicHeader } from './helpers/app.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from './helpers/processes.js'
import { testDialect } from './helpers/store.js'

const NODES = 4

/**
 * Issue 12, point 6: nodes reaching first start together on one empty database (and one data
 * folder) create exactly one account; the others do not crash and say another node did it.
 */
describe(`${NODES} nodes starting together on one empty ${testDialect} database`, () => {
  let db: SharedDatabase
  let dataDir: string
  const servers: ServerProcess[] = []

  beforeAll(async () => {
    db = await sharedDatabase()
    dataDir = db.dataDir()
    const started = await Promise.allSettled(
      Array.from({ length: NODES }, () => startServerProcess(db.env(dataDir))),
    )
    for (const s of started) if (s.status === 'fulfilled') servers.push(s.value)
    const failed = started.filter((s) => s.status === 'rejected')
    if (failed.length > 0) throw (failed[0] as PromiseRejectedResult).reason
  }, 90_000)

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await db?.drop()
  })

  it('creates exactly one account, one 0600 credentials file, and every node serves it', async () => {
    expect(servers).toHaveLength(NODES)
    const store = db.open()
    try {
      const accounts = await store.db.selectFrom('accounts').select('id').execute()
      expect(accounts).toHaveLength(1)
      const users = await store.db.selectFrom('users').select('id').execute()
      expect(users).toHaveLength(1)
    } finally {
      await store.close()
    }
    const files = readdirSync(dataDir).filter((f) => f.startsWith('bootstrap-credentials'))
    expect(files).toEqual(['bootstrap-credentials.json'])
    expect(statSync(join(dataDir, files[0] as string)).mode & 0o777).toBe(0o600)
    const creds = bootstrapCredentials(dataDir)
    const logs = servers.map((s) => s.output())
    expect(
      logs.filter((l) => l.includes('created the first account; admin credentials')),
    ).toHaveLength(1)
    // The others either found it done or lost the race and said so; none failed on the file.
    for (const l of logs) expect(l).not.toMatch(/EEXIST|already exists/)
    for (const server of servers) {
      const me = await fetch(`${server.url}/v1/auth/me`, {
        headers: { authorization: basicHeader(creds.api_key) },
      })
      expect(me.status).toBe(200)
      const login = await fetch(`${server.url}/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          account_id: creds.account_id,
          username: creds.username,
          password: creds.password,
        }),
      })
      expect(login.status).toBe(200)
    }
  })
})
