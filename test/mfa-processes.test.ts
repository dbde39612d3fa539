import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.js'
import { FsBlobStore } from '../src/blob/fs-blob-store.js'
import type { MasterKey } from '../src/crypto/master-key.js'
import { createDeps, type Deps } from '../src/deps.js'
import { ManualClock } from '../src/lib/clock.js'
import type { AccountCredentials } from '../src/modules/accounts/accounts.service.js'
import type { Store } from '../src/store/db.js'
import { migrateToLatest } from '../src/store/migrate.js'
import { Api, TEST_ARGON2, type TestApp } from './helpers/app.js'
import { appCode, enrolledUser, login, STEP_MS } from './helpers/mfa.js'
import {
  bootstrapCredentials,
  cofferFails,
  runCoffer,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from './helpers/processes.js'
import { testDialect } from './helpers/store.js'

/**
 * What one process cannot show: `coffer serve` processes sharing one database (a SQLite file or
 * a PostgreSQL schema) accept a code once between them (README, Operations: several nodes), and the
 * `coffer mfa reset` command.
 *
 * Both runs catch a code remembered per process. A check-then-write (read the row, then update
 * it unconditionally) is caught reliably on PostgreSQL only: better-sqlite3 is synchronous, so a
 * SQLite process runs a login's statements back to back and the race is left to two processes
 * hitting the same microseconds.
 */

const PASSWORD = 'correct horse battery'

/** The app of this test process, on the given store, with its own hand-moved clock. */
async function localApp(store: Store, masterKey: MasterKey, clock: ManualClock, dir: string) {
  const deps: Deps = createDeps(store, {
    masterKey,
    blobStore: new FsBlobStore(join(dir, 'blobs')),
    argon2: TEST_ARGON2,
    clock,
  })
  const app: FastifyInstance = await buildApp(deps)
  await app.ready()
  return { app, deps, api: new Api(app) }
}

interface LoginAnswer {
  user: { id: string; access_token: string }
  error: { code: string }
}

/** Waits, if needed, so that at least `ms` remain in the current real 30-second step. */
async function awayFromStepEnd(ms: number): Promise<void> {
  const left = STEP_MS - (Date.now() % STEP_MS)
  if (left < ms) await sleep(left + 50)
}

describe(`two server processes on one ${testDialect} database`, () => {
  // The enrollment runs in this process an hour in the past: its codes are long spent when
  // the servers, on the real clock, see the login codes.
  const setupClock = new ManualClock(new Date(Date.now() - 3600_000))
  let db: SharedDatabase
  let store: Store
  let local: Awaited<ReturnType<typeof localApp>>
  let admin: AccountCredentials
  const servers: ServerProcess[] = []

  beforeAll(async () => {
    db = await sharedDatabase()
    const firstDir = db.dataDir()
    // One after the other: the first migrates and bootstraps, the second finds both done.
    // Every trial's 9 losers count against the loopback address: lift that limit (50) here.
    const env = (dir: string) => ({ ...db.env(dir), COFFER_LOGIN_ADDRESS_MAX_FAILURES: '1000' })
    servers.push(await startServerProcess(env(firstDir)))
    servers.push(await startServerProcess(env(db.dataDir())))
    admin = bootstrapCredentials(firstDir)
    // This process enrolls the users, through its own app on the same database.
    store = db.open()
    local = await localApp(store, db.masterKey, setupClock, db.dataDir())
  }, 90_000)

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await local?.app.close()
    await store?.close()
    await db?.drop()
  })

  it('concurrent logins with one code on both servers: exactly one succeeds, every trial', async () => {
    const t = { ...local, admin: { ...admin } } as unknown as TestApp
    for (let trial = 0; trial < 8; trial++) {
      const user = await enrolledUser(t, setupClock, PASSWORD)
      await awayFromStepEnd(5_000)
      const form = new URLSearchParams({
        account_id: admin.account_id,
        username: user.username,
        password: PASSWORD,
        mfa_code: appCode(user.secret, new Date()),
      })
      // 10 from one client address is the per-client allowance of the login limit.
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          fetch(`${servers[i % 2]?.url}/v1/auth/login`, { method: 'POST', body: form }).then(
            async (r) => ({ status: r.status, body: (await r.json()) as LoginAnswer }),
          ),
        ),
      )
      const ok = answers.filter((a) => a.status === 200)
      expect(ok.length, JSON.stringify(answers.map((a) => a.status))).toBe(1)
      expect(ok[0]?.body.user.id).toBe(user.id)
      for (const a of answers.filter((x) => x.status !== 200)) {
        expect(a.status).toBe(401)
        expect(a.body.error.code).toBe('LOGIN_FAILED')
      }
      // The winner's token works on the other server too: one database, one truth.
      const token = ok[0]?.body.user.access_token as string
      for (const s of servers) {
        const me = await fetch(`${s.url}/v1/auth/me`, {
          headers: { authorization: `Basic ${Buffer.from(`${token}:`).toString('base64')}` },
        })
        expect(me.status).toBe(200)
      }
    }
  }, 120_000)
})

describe('coffer mfa reset', () => {
  it('unenrolls a user (recovery after a lost device) and refuses bad arguments', async () => {
    const db = await sharedDatabase()
    const dir = db.dataDir()
    const clock = new ManualClock('2026-03-01T00:00:10.000Z')
    const open = async () => {
      const store = db.open()
      await migrateToLatest(store.db)
      return { store, ...(await localApp(store, db.masterKey, clock, dir)) }
    }
    try {
      const first = await open()
      const admin = await first.deps.accounts.createWithAdmin()
      const t = { ...first, admin } as unknown as TestApp
      const user = await enrolledUser(t, clock, PASSWORD)
      const bystander = await enrolledUser(t, clock, PASSWORD)
      await first.app.close()
      await first.store.close()

      const reset = (...args: string[]) => ['mfa', 'reset', ...args]
      const { stdout, stderr } = await runCoffer(
        reset(admin.account_id, user.id.toUpperCase()),
        db.env(dir),
      )
      expect(JSON.parse(stdout)).toEqual({
        account_id: admin.account_id,
        user_id: user.id,
        mfa_enrolled: false,
      })
      expect(stderr).not.toContain(user.secret)
      const bad = await cofferFails(reset('not-a-uuid', user.id), db.env(dir))
      expect(bad.code).toBe(1)
      expect(bad.stderr).toMatch(/usage: coffer mfa reset/)
      const unknown = await cofferFails(
        reset(admin.account_id, '0190aaaa-0000-7000-8000-000000000000'),
        db.env(dir),
      )
      expect(unknown.code).toBe(1)
      expect(unknown.stderr).toMatch(/User not found/)

      const second = await open()
      const t2 = { ...second, admin } as unknown as TestApp
      try {
        const creds = { account_id: admin.account_id, password: PASSWORD }
        const plain = await login(t2, { ...creds, username: user.username })
        expect(plain.statusCode).toBe(200)
        expect(plain.json().user.mfa_enrolled).toBe(false)
        const rows = await second.store.db.selectFrom('user_mfa').select('user_id').execute()
        expect(rows.map((r) => r.user_id)).toEqual([bystander.id])
        // Only that user: the other one still needs a code.
        const other = await login(t2, { ...creds, username: bystander.username })
        expect(other.json().error.type).toBe('USER.MFA_CODE_REQUIRED')
      } finally {
        await second.app.close()
        await second.store.close()
      }
    } finally {
      await db.drop()
    }
  }, 60_000)
})
