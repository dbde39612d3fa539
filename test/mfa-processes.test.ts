import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.js'
import { FsBlobStore } from '../src/blob/fs-blob-store.js'
import { MasterKey } from '../src/crypto/master-key.js'
import { createDeps, type Deps } from '../src/deps.js'
import { ManualClock } from '../src/lib/clock.js'
import type { AccountCredentials } from '../src/modules/accounts/accounts.service.js'
import { writeKeyFile } from '../src/modules/keys/master-key-source.js'
import { openStore, type Store } from '../src/store/db.js'
import { migrateToLatest } from '../src/store/migrate.js'
import { Api, TEST_ARGON2, type TestApp } from './helpers/app.js'
import { appCode, enrolledUser, login, STEP_MS } from './helpers/mfa.js'
import { TEST_PG_URL, testDialect } from './helpers/store.js'

/**
 * What one process cannot show: `coffer serve` processes sharing one PostgreSQL database accept
 * a code once between them (design.md, Scaling out), and the `coffer mfa reset` command.
 */

const run = promisify(execFile)
const MAIN = ['--import', 'tsx', 'src/main.ts']
const PASSWORD = 'correct horse battery'
const dirs: string[] = []

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env }
  for (const k of Object.keys(base)) if (k.startsWith('COFFER_')) delete base[k]
  return { ...base, COFFER_LOG_LEVEL: 'info', ...extra }
}

/** Starts `coffer serve` and resolves with its base URL once it listens. */
function serve(extra: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...MAIN, 'serve'], {
    env: env({ COFFER_PORT: '0', ...extra }),
  })
  let out = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 30_000)
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      const m = /listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve({ child, url: m[1] as string })
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', (code) => reject(new Error(`server exited (${code}): ${out}`)))
  })
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const done = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  await done
}

/** The app of this test process, on the given store, with its own hand-moved clock. */
async function localApp(store: Store, masterKey: MasterKey, clock: ManualClock) {
  const deps: Deps = createDeps(store, {
    masterKey,
    blobStore: new FsBlobStore(tempDir('coffer-mfa-blobs-')),
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

describe.skipIf(testDialect !== 'postgres')(
  'two server processes on one PostgreSQL database (PostgreSQL only: SQLite is one process’s file)',
  () => {
    const schema = `coffer_test_mfa_${randomBytes(6).toString('hex')}`
    const masterKey = MasterKey.generate()
    // The enrollment runs in this process an hour in the past: its codes are long spent when
    // the servers, on the real clock, see the login codes.
    const setupClock = new ManualClock(new Date(Date.now() - 3600_000))
    let store: Store
    let local: Awaited<ReturnType<typeof localApp>>
    let admin: AccountCredentials
    const servers: { child: ChildProcess; url: string }[] = []

    beforeAll(async () => {
      const c = new pg.Client({ connectionString: TEST_PG_URL })
      await c.connect()
      await c.query(`create schema ${schema}`)
      await c.end()
      store = openStore({ url: TEST_PG_URL, pgSchema: schema, pgPoolSize: 3 })
      await migrateToLatest(store.db)
      local = await localApp(store, masterKey, setupClock)
      admin = await local.deps.accounts.createWithAdmin()
      const url = new URL(TEST_PG_URL)
      url.searchParams.set('options', `-c search_path=${schema}`)
      for (let i = 0; i < 2; i++) {
        servers.push(
          await serve({
            COFFER_DATABASE_URL: url.toString(),
            COFFER_MASTER_KEY: masterKey.toBase64(),
            COFFER_DATA_DIR: tempDir('coffer-mfa-node-'),
          }),
        )
      }
    }, 90_000)

    afterAll(async () => {
      await Promise.all(servers.map((s) => stop(s.child)))
      await local?.app.close()
      await store?.close()
      const c = new pg.Client({ connectionString: TEST_PG_URL })
      await c.connect()
      await c.query(`drop schema if exists ${schema} cascade`)
      await c.end()
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
  },
)

/**
 * The database the command works on: a SQLite file in the data folder, or (TEST_DATABASE=postgres)
 * a fresh PostgreSQL schema. One process must not mix the two engines (store/precompiled.ts
 * compiles its hot queries once, for the first engine it meets).
 */
async function cliDatabase(dir: string) {
  if (testDialect === 'sqlite') {
    const file = join(dir, 'coffer.db')
    const env: Record<string, string> = {}
    return { env, open: () => openStore({ url: file }), drop: async () => {} }
  }
  const schema = `coffer_test_mfacli_${randomBytes(6).toString('hex')}`
  const admin = async (query: string) => {
    const c = new pg.Client({ connectionString: TEST_PG_URL })
    await c.connect()
    await c.query(query)
    await c.end()
  }
  await admin(`create schema ${schema}`)
  const url = new URL(TEST_PG_URL)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return {
    env: { COFFER_DATABASE_URL: url.toString() },
    open: () => openStore({ url: TEST_PG_URL, pgSchema: schema, pgPoolSize: 2 }),
    drop: () => admin(`drop schema if exists ${schema} cascade`),
  }
}

describe('coffer mfa reset', () => {
  it('unenrolls a user (recovery after a lost device) and refuses bad arguments', async () => {
    const dir = tempDir('coffer-mfa-cli-')
    const database = await cliDatabase(dir)
    const masterKey = MasterKey.generate()
    writeKeyFile(join(dir, 'master.key'), masterKey)
    const clock = new ManualClock('2026-03-01T00:00:10.000Z')
    const open = async () => {
      const store = database.open()
      await migrateToLatest(store.db)
      return { store, ...(await localApp(store, masterKey, clock)) }
    }
    const first = await open()
    const admin = await first.deps.accounts.createWithAdmin()
    const t = { ...first, admin } as unknown as TestApp
    const user = await enrolledUser(t, clock, PASSWORD)
    const bystander = await enrolledUser(t, clock, PASSWORD)
    await first.app.close()
    await first.store.close()

    const cli = (...args: string[]) =>
      run(process.execPath, [...MAIN, 'mfa', 'reset', ...args], {
        env: env({ COFFER_DATA_DIR: dir, ...database.env }),
      })
    const { stdout, stderr } = await cli(admin.account_id, user.id.toUpperCase())
    expect(JSON.parse(stdout)).toEqual({
      account_id: admin.account_id,
      user_id: user.id,
      mfa_enrolled: false,
    })
    expect(stderr).not.toContain(user.secret)
    for (const bad of [['not-a-uuid', user.id]]) {
      const failed = await cli(...bad).catch((e: { code: number; stderr: string }) => e)
      expect((failed as { code: number }).code).toBe(1)
      expect((failed as { stderr: string }).stderr).toMatch(/usage: coffer mfa reset/)
    }
    const unknown = await cli(admin.account_id, '0190aaaa-0000-7000-8000-000000000000').catch(
      (e: { code: number; stderr: string }) => e,
    )
    expect((unknown as { code: number }).code).toBe(1)
    expect((unknown as { stderr: string }).stderr).toMatch(/User not found/)

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
      await database.drop()
    }
  }, 60_000)
})
