import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { Secret } from 'otpauth'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps } from '../../src/deps.js'
import { ManualClock } from '../../src/lib/clock.js'
import { migrateToLatest } from '../../src/store/migrate.js'
import {
  Api,
  buildTestApp,
  createUser,
  errorOf,
  TEST_ARGON2,
  type TestApp,
} from '../helpers/app.js'
import {
  codeAtOffset,
  enrolledUser,
  login,
  mfaPath,
  STEP_MS,
  startEnrollment,
} from '../helpers/mfa.js'
import { decryptSqlcipherFile } from '../helpers/sqlcipher.js'
import { openTestSqliteStore, testDialect, testSqliteKey } from '../helpers/store.js'

const PASSWORD = 'correct horse battery'
const tempDirs: string[] = []

afterAll(() => {
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
})

/** A base32 secret in every form it could leak in: text, raw bytes, hex, base64 (3 alignments). */
function needles(secretBase32: string): Buffer[] {
  const raw = Buffer.from(new Uint8Array(Secret.fromBase32(secretBase32).buffer))
  const out = [Buffer.from(secretBase32), raw, Buffer.from(raw.toString('hex'))]
  for (let k = 0; k < 3; k++) {
    const full = Buffer.concat([Buffer.alloc(k, 0x78), raw]).toString('base64')
    out.push(Buffer.from(full.slice(k === 0 ? 0 : 4, full.length - 4)))
  }
  return out
}

function hits(files: Map<string, Buffer>, secrets: string[]): string[] {
  const found: string[] = []
  for (const secret of secrets) {
    for (const needle of needles(secret)) {
      for (const [file, bytes] of files)
        if (bytes.includes(needle)) found.push(`${secret} in ${file}`)
    }
  }
  return found
}

function readAll(dir: string): Map<string, Buffer> {
  return new Map(
    readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => [join(dir, e.name), readFileSync(join(dir, e.name))]),
  )
}

describe('MFA secrets at rest', () => {
  it.skipIf(testDialect === 'postgres')(
    'are in neither the SQLite file nor its WAL, pending or active (skipped on PostgreSQL: scans a SQLite file)',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'coffer-mfa-scan-'))
      tempDirs.push(dir)
      const store = openTestSqliteStore(join(dir, 'coffer.db'))
      await migrateToLatest(store.db)
      const clock = new ManualClock('2026-03-01T00:00:10.000Z')
      const deps = createDeps(store, {
        masterKey: MasterKey.generate(),
        blobStore: new FsBlobStore(join(dir, 'blobs')),
        argon2: TEST_ARGON2,
        clock,
      })
      const app = await buildApp(deps)
      await app.ready()
      const admin = await deps.accounts.createWithAdmin()
      const t = { app, api: new Api(app), admin, deps } as unknown as TestApp
      const enrolled = await enrolledUser(t, clock, PASSWORD)
      const pendingUser = await createUser(t, { password: PASSWORD })
      const pending = await startEnrollment(t, pendingUser.id)

      const open = readAll(dir)
      expect([...open.keys()].some((f) => f.endsWith('coffer.db-wal'))).toBe(true)
      expect(hits(open, [enrolled.secret, pending])).toEqual([])
      // The whole file is encrypted (issue 22): not even the username shows in the raw bytes.
      const name = Buffer.from(enrolled.username)
      expect([...open.values()].some((b) => b.includes(name))).toBe(false)
      // Whoever holds the file key sees the pages: the username, never the MFA secrets (they are
      // keyring ciphertexts), so the scan does see what is there.
      await sql`pragma wal_checkpoint(TRUNCATE)`.execute(store.db)
      const file = join(dir, 'coffer.db')
      const pages = new Map([[file, decryptSqlcipherFile(file, testSqliteKey(file))]])
      expect(pages.get(file)?.includes(name)).toBe(true)
      expect(hits(pages, [enrolled.secret, pending])).toEqual([])
      // Written, not lost: the secret still verifies codes.
      const ok = await login(t, {
        account_id: admin.account_id,
        username: enrolled.username,
        password: PASSWORD,
        mfa_code: codeAtOffset(enrolled.secret, clock),
      })
      expect(ok.statusCode).toBe(200)

      await app.close()
      await store.close()
      expect(hits(readAll(dir), [enrolled.secret, pending])).toEqual([])
    },
    60_000,
  )

  describe('on this database engine', () => {
    let t: TestApp
    const clock = new ManualClock('2026-03-01T00:00:10.000Z')
    beforeAll(async () => {
      t = await buildTestApp({ clock })
    })
    afterAll(() => t.close())

    const creds = (username: string, mfa_code: string) => ({
      account_id: t.admin.account_id,
      username,
      password: PASSWORD,
      mfa_code,
    })

    it('stores only keyring ciphertexts: no secret in a dump of the users and MFA tables', async () => {
      const enrolled = await enrolledUser(t, clock, PASSWORD)
      const other = await createUser(t, { password: PASSWORD })
      const pending = await startEnrollment(t, other.id)
      const db = t.deps.store.db
      const rows = await db.selectFrom('user_mfa').selectAll().execute()
      expect(rows.length).toBe(2)
      for (const row of rows) {
        for (const value of [row.secret, row.pending_secret]) {
          if (value !== null) expect(value).toMatch(/^c1\./)
        }
      }
      const users = await sql`select * from users`.execute(db)
      const dump = Buffer.from(JSON.stringify([rows, users.rows]))
      expect(hits(new Map([['dump', dump]]), [enrolled.secret, pending])).toEqual([])
      expect(dump.includes(Buffer.from(enrolled.username))).toBe(true)
    })

    it('a secret moved to another user, or replaced by plaintext, fails closed', async () => {
      const a = await enrolledUser(t, clock, PASSWORD)
      const b = await enrolledUser(t, clock, PASSWORD)
      const db = t.deps.store.db
      const secretOf = async (id: string) =>
        (
          await db
            .selectFrom('user_mfa')
            .select('secret')
            .where('user_id', '=', id)
            .executeTakeFirstOrThrow()
        ).secret
      const sealedB = await secretOf(b.id)
      await db
        .updateTable('user_mfa')
        .set({ secret: sealedB })
        .where('user_id', '=', a.id)
        .execute()
      // B's secret under A's row: B's codes must not log A in, nor A's.
      for (const secret of [a.secret, b.secret]) {
        const res = await login(t, creds(a.username, codeAtOffset(secret, clock)))
        expect(res.statusCode).toBe(500)
        expect(errorOf(res).code).toBe('DATA_INTEGRITY_FAILURE')
        expect(res.body).not.toContain(secret)
      }
      const off = await t.api.post(mfaPath(a.id, 'unenroll'), {
        auth: t.admin.api_key,
        json: { mfa_code: codeAtOffset(b.secret, clock), password: PASSWORD },
      })
      expect(errorOf(off).code).toBe('DATA_INTEGRITY_FAILURE')
      await db
        .updateTable('user_mfa')
        .set({ secret: b.secret })
        .where('user_id', '=', b.id)
        .execute()
      const plain = await login(t, creds(b.username, codeAtOffset(b.secret, clock)))
      expect(errorOf(plain).code).toBe('DATA_INTEGRITY_FAILURE')
    })
  })
})

describe('single use under concurrency (one app)', () => {
  let t: TestApp
  const clock = new ManualClock('2026-04-01T00:00:10.000Z')
  beforeAll(async () => {
    t = await buildTestApp({ clock })
  })
  afterAll(() => t.close())

  const statuses = (responses: { statusCode: number }[]) => responses.map((r) => r.statusCode)

  it('20 parallel logins with one code: exactly one succeeds, every round', async () => {
    for (let round = 0; round < 5; round++) {
      const user = await enrolledUser(t, clock, PASSWORD)
      const code = codeAtOffset(user.secret, clock)
      const form = {
        account_id: t.admin.account_id,
        username: user.username,
        password: PASSWORD,
        mfa_code: code,
      }
      const answers = await Promise.all(Array.from({ length: 20 }, () => login(t, form)))
      expect(statuses(answers).filter((s) => s === 200).length).toBe(1)
      for (const res of answers.filter((r) => r.statusCode !== 200)) {
        expect(res.statusCode).toBe(401)
        expect(errorOf(res).code).toBe('LOGIN_FAILED')
      }
    }
  })

  it('the login check itself, 20 at once (no password hashing to spread them): one acceptance', async () => {
    // Over HTTP each login first waits for its own argon2 verification, which spreads the
    // requests out on SQLite's single connection; here every check reaches the database at once.
    for (let round = 0; round < 5; round++) {
      const user = await enrolledUser(t, clock, PASSWORD)
      const code = codeAtOffset(user.secret, clock)
      const accountId = t.admin.account_id
      const checks = await Promise.all(
        Array.from({ length: 20 }, () => t.deps.mfa.checkLoginCode(accountId, user.id, code, true)),
      )
      expect(checks.filter((c) => c === 'ok').length).toBe(1)
      expect(checks.filter((c) => c === 'invalid').length).toBe(19)
    }
  })

  it('parallel finalizes with the same codes: exactly one enrolls', async () => {
    for (let round = 0; round < 5; round++) {
      const user = await createUser(t, { password: PASSWORD })
      const secret = await startEnrollment(t, user.id)
      const json = {
        mfa_code_1: codeAtOffset(secret, clock, 0),
        mfa_code_2: codeAtOffset(secret, clock, 1),
      }
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          t.api.post(mfaPath(user.id, 'finalize_enrollment'), { auth: t.admin.api_key, json }),
        ),
      )
      expect(statuses(answers).filter((s) => s === 200).length).toBe(1)
      for (const res of answers.filter((r) => r.statusCode !== 200)) {
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).type).toMatch(
          /^USER\.MFA_(FINALIZE_ENROLLMENT_FAILURE|ALREADY_ENROLLED)$/,
        )
      }
    }
  })

  it('one code sent to login and unenroll at once is accepted by exactly one of them', async () => {
    for (let round = 0; round < 5; round++) {
      const user = await enrolledUser(t, clock, PASSWORD)
      const code = codeAtOffset(user.secret, clock)
      const form = {
        account_id: t.admin.account_id,
        username: user.username,
        password: PASSWORD,
        mfa_code: code,
      }
      const requests = Array.from({ length: 12 }, (_, i) =>
        i % 2 === 0
          ? login(t, form)
          : t.api.post(mfaPath(user.id, 'unenroll'), {
              auth: t.admin.api_key,
              json: { mfa_code: code, password: PASSWORD },
            }),
      )
      const answers = await Promise.all(requests)
      expect(statuses(answers).filter((s) => s === 200).length).toBe(1)
      expect(statuses(answers).every((s) => [200, 400, 401, 429].includes(s))).toBe(true)
      clock.advance(STEP_MS)
    }
  })
})
