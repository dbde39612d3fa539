import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { newId } from '../../src/lib/ids.js'
import * as usersRepo from '../../src/modules/users/users.repo.js'
import { basicHeader, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'
import { openCofferSqliteFile } from '../helpers/processes.js'
import { testDialect } from '../helpers/store.js'

/**
 * Regression tests from the code review of the identity core: each `it` pins a defect that was
 * reproduced first (the comment says how it failed) and then fixed.
 */
const PASSWORD = 'correct horse battery'

function login(t: TestApp, form: Record<string, string>, remoteAddress = '10.0.0.1') {
  return t.app.inject({
    method: 'POST',
    url: '/v1/auth/login',
    remoteAddress,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  })
}

function countCodes(codes: number[]): Record<number, number> {
  const out: Record<number, number> = {}
  for (const c of codes) out[c] = (out[c] ?? 0) + 1
  return out
}

describe('review regressions', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await buildTestApp()
  })
  afterAll(() => t.close())

  describe('login rate limits under concurrency', () => {
    // Was: every attempt read the counter before any of them recorded a failure, so 40 parallel
    // guesses from one client were all verified (40 × 401, 0 × 429).
    it('evaluates at most 10 parallel guesses per client', async () => {
      const victim = await createUser(t, { password: PASSWORD })
      const form = {
        account_id: t.admin.account_id,
        username: victim.username,
        password: 'wrong guess',
      }
      const verify = vi.spyOn(t.deps.hasher, 'verify')
      const res = await Promise.all(Array.from({ length: 40 }, () => login(t, form, '10.9.0.1')))
      const codes = countCodes(res.map((r) => r.statusCode))
      expect(verify.mock.calls.length).toBeLessThanOrEqual(10)
      verify.mockRestore()
      expect(codes[401]).toBe(10)
      expect(codes[429]).toBe(30)
      // The real user elsewhere is unaffected.
      expect((await login(t, { ...form, password: PASSWORD }, '10.9.0.2')).statusCode).toBe(200)
    })

    it('evaluates at most 100 parallel guesses per user from many clients', async () => {
      const victim = await createUser(t, { password: PASSWORD })
      const form = {
        account_id: t.admin.account_id,
        username: victim.username,
        password: 'wrong guess',
      }
      const res = await Promise.all(
        Array.from({ length: 130 }, (_, i) => login(t, form, `10.10.${i >> 3}.${i & 7}`)),
      )
      const codes = countCodes(res.map((r) => r.statusCode))
      expect(codes[401]).toBe(100)
      expect(codes[429]).toBe(30)
    })

    it('does not count a successful login as a failure of the user', async () => {
      const user = await createUser(t, { password: PASSWORD })
      const form = { account_id: t.admin.account_id, username: user.username, password: PASSWORD }
      for (let i = 0; i < 5; i++) {
        expect((await login(t, form, `10.11.0.${i}`)).statusCode).toBe(200)
      }
      const bad = { ...form, password: 'wrong guess' }
      const res = await Promise.all(
        Array.from({ length: 100 }, (_, i) => login(t, bad, `10.11.${1 + (i >> 3)}.${i & 7}`)),
      )
      expect(res.every((r) => r.statusCode === 401)).toBe(true)
    })
  })

  describe('HTTP edge cases', () => {
    const admin = () => basicHeader(t.admin.api_key)

    // Was: 500 INTERNAL for any malformed multipart body on a form route.
    it('answers a malformed multipart body with 400, not 500', async () => {
      for (const [contentType, payload] of [
        [
          'multipart/form-data; boundary=XYZ',
          '--XYZ\r\nContent-Disposition: form-data; name="username"\r\n\r\nbob',
        ],
        ['multipart/form-data', 'no boundary at all'],
      ] as const) {
        const res = await t.app.inject({
          method: 'POST',
          url: '/v1/users',
          headers: { authorization: admin(), 'content-type': contentType },
          payload,
        })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res)).toMatchObject({
          type: 'invalid_request_error',
          code: 'INVALID_MULTIPART',
        })
      }
      // An anonymous client is refused before its body is read at all.
      const anonymous = await t.app.inject({
        method: 'POST',
        url: '/v1/users',
        headers: { 'content-type': 'multipart/form-data; boundary=XYZ' },
        payload: '--XYZ\r\nbroken',
      })
      expect(anonymous.statusCode).toBe(401)
    })

    // Was: 200 — Fastify's bodyLimit (1 MB) never applied to multipart, so a form route buffered
    // up to 100 fields of 1 MB each (a 20 MB body created the user; urlencoded got 413).
    it('holds multipart forms to the body limit (413), as urlencoded ones', async () => {
      const fields: Record<string, string> = { username: 'big-form' }
      for (let i = 0; i < 3; i++) fields[`pad${i}`] = 'x'.repeat(400_000)
      for (const encoding of ['multipart', 'form'] as const) {
        const res = await t.api.post('/v1/users', { auth: t.admin.api_key, [encoding]: fields })
        expect(res.statusCode).toBe(413)
        expect(errorOf(res).code).toBe('PAYLOAD_TOO_LARGE')
      }
      const small = await t.api.post('/v1/users', {
        auth: t.admin.api_key,
        multipart: { username: 'big-form', pad: 'x'.repeat(400_000) },
      })
      expect(small.statusCode).toBe(200)
    })

    // Was: errors thrown while authenticating skipped the onRequest hook that sets these headers.
    it('sends no-store and nosniff on error answers too', async () => {
      for (const res of [
        await t.api.get('/v1/users'),
        await t.api.get('/v1/users', { auth: 'not-a-key' }),
        await t.api.get('/v1/auth/me'),
        await t.api.get('/v1/nowhere', { auth: t.admin.api_key }),
      ]) {
        expect(res.statusCode).toBeGreaterThanOrEqual(400)
        expect(res.headers['cache-control']).toBe('no-store')
        expect(res.headers['x-content-type-options']).toBe('nosniff')
      }
    })

    // Was: Fastify's own `{"error":"Bad Request","code":"FST_ERR_MAX_PARAM_LENGTH",…}` body with
    // the whole path echoed back, and no envelope.
    it('answers router errors (over-long id list, malformed URL) in the envelope', async () => {
      const ids = Array.from({ length: 300 }, () => newId()).join(',')
      const long = await t.api.get(`/v2/users/${ids}`, { auth: t.admin.api_key })
      expect(long.statusCode).toBe(414)
      expect(errorOf(long)).toMatchObject({ code: 'URI_TOO_LONG' })
      expect(long.body).not.toContain(ids.slice(0, 36))
      expect(long.headers['cache-control']).toBe('no-store')
      const bad = await t.api.get('/v1/users/%E0%A4%A', { auth: t.admin.api_key })
      expect(bad.statusCode).toBe(400)
      expect(errorOf(bad)).toMatchObject({ code: 'INVALID_URL' })
    })
  })

  describe('deeply nested JSON', () => {
    const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`

    // Was: 500 — JSON.parse took 100,000 levels, then JSON.stringify overflowed the stack while
    // storing them. Reachable by any user through their own attributes (PUT /v1/auth/me).
    it('refuses attributes nested deeper than 256 levels with 400, naming the field', async () => {
      const u = await createUser(t)
      for (const [url, auth] of [
        ['/v1/auth/me', u.apiKey],
        [`/v1/users/${u.id}`, t.admin.api_key],
      ] as const) {
        const res = await t.api.put(url, {
          auth,
          form: { attributes: Buffer.from(deep(100_000)).toString('base64') },
        })
        expect(res.statusCode).toBe(400)
        expect(errorOf(res).message).toMatch(/^attributes must not nest deeper than 256/)
      }
      const ok = await t.api.put('/v1/auth/me', {
        auth: u.apiKey,
        form: { attributes: Buffer.from(`{"a":${deep(255)}}`).toString('base64') },
      })
      expect(ok.statusCode).toBe(200)
    })

    it('refuses a JSON body nested that deep with 400', async () => {
      const res = await t.app.inject({
        method: 'PUT',
        url: `/v1/groups/${newId()}`,
        headers: {
          authorization: basicHeader(t.admin.api_key),
          'content-type': 'application/json',
        },
        payload: `{"policy":${deep(100_000)}}`,
      })
      expect(res.statusCode).toBe(400)
      expect(errorOf(res).code).toBe('INVALID_JSON')
    })
  })

  describe('control characters in stored text', () => {
    // Was (PostgreSQL): 500, because text cannot hold NUL — reachable without any credential.
    it('answers a login with a NUL in the username like any unknown user', async () => {
      const res = await login(
        t,
        { account_id: t.admin.account_id, username: 'admin\u0000', password: 'whatever it is' },
        '10.12.0.1',
      )
      expect(res.statusCode).toBe(401)
      expect(errorOf(res).code).toBe('LOGIN_FAILED')
    })

    // Was (PostgreSQL): 500 on create and rename; SQLite stored the NUL.
    it('refuses group names with control characters, naming the field', async () => {
      const created = await t.api.post('/v1/groups', {
        auth: t.admin.api_key,
        form: { name: 'ops\u0000team' },
      })
      expect(created.statusCode).toBe(400)
      expect(errorOf(created).message).toMatch(/^name /)
      const g = (
        await t.api.post('/v1/groups', { auth: t.admin.api_key, form: { name: 'ctl-rename' } })
      ).json().group.id
      const renamed = await t.api.put(`/v1/groups/${g}`, {
        auth: t.admin.api_key,
        json: { name: 'bad\nname' },
      })
      expect(renamed.statusCode).toBe(400)
    })
  })

  describe('a DEACTIVATED user stays deactivated', () => {
    // Was: PUT read the user (ACTIVATED), hashed the new password while a DELETE deactivated the
    // user, then wrote status ACTIVATED: the user was back, and logged in with that password.
    it('a status change read before a concurrent DELETE does not resurrect the user', async () => {
      const u = await createUser(t, { password: PASSWORD })
      const hash = t.deps.hasher.hash.bind(t.deps.hasher)
      const spy = vi.spyOn(t.deps.hasher, 'hash').mockImplementationOnce(async (pw: string) => {
        const del = await t.api.delete(`/v1/users/${u.id}`, { auth: t.admin.api_key })
        expect(del.statusCode).toBe(200)
        return hash(pw)
      })
      const put = await t.api.put(`/v1/users/${u.id}`, {
        auth: t.admin.api_key,
        form: { status: 'ACTIVATED', password: 'another password' },
      })
      spy.mockRestore()
      expect(put.statusCode).toBe(400)
      expect(errorOf(put).message).toMatch(/^status /)
      const read = await t.api.get(`/v1/users/${u.id}`, { auth: t.admin.api_key })
      expect(read.json().user.status).toBe('DEACTIVATED')
      const again = await login(
        t,
        { account_id: t.admin.account_id, username: u.username, password: 'another password' },
        '10.13.0.1',
      )
      expect(again.statusCode).toBe(401)
    })

    it('holds when PUT and DELETE really run in parallel (PostgreSQL READ COMMITTED too)', async () => {
      for (let i = 0; i < 15; i++) {
        const u = await createUser(t)
        const [put, del] = await Promise.all([
          t.api.put(`/v1/users/${u.id}`, {
            auth: t.admin.api_key,
            form: { status: 'LOCKED', access_token: '1' },
          }),
          t.api.delete(`/v1/users/${u.id}`, { auth: t.admin.api_key }),
        ])
        expect([200, 400]).toContain(put.statusCode)
        expect(del.statusCode).toBe(200)
        const read = await t.api.get(`/v1/users/${u.id}`, { auth: t.admin.api_key })
        expect(read.json().user.status).toBe('DEACTIVATED')
      }
    })

    it('two parallel DELETEs deactivate once: the second is a 404', async () => {
      for (let i = 0; i < 10; i++) {
        const u = await createUser(t)
        const res = await Promise.all([
          t.api.delete(`/v1/users/${u.id}`, { auth: t.admin.api_key }),
          t.api.delete(`/v1/users/${u.id}`, { auth: t.admin.api_key }),
        ])
        expect(res.map((r) => r.statusCode).sort()).toEqual([200, 404])
      }
    })
  })

  describe('races with a group being deleted', () => {
    // Was (PostgreSQL): the membership insert hit the foreign key of the group deleted meanwhile
    // and answered 500 (about a third of the rounds).
    it('adding members or creating users in a group deleted meanwhile never answers 5xx', async () => {
      const member = await createUser(t)
      const seen: number[] = []
      for (let i = 0; i < 25; i++) {
        const g = (
          await t.api.post('/v1/groups', { auth: t.admin.api_key, form: { name: `race-${i}` } })
        ).json().group.id
        const res = await Promise.all([
          t.api.post(`/v1/groups/${g}/membership`, {
            auth: t.admin.api_key,
            json: { user_ids: [member.id] },
          }),
          t.api.put(`/v1/groups/${g}`, {
            auth: t.admin.api_key,
            json: { user_ids: [member.id] },
          }),
          t.api.delete(`/v1/groups/${g}`, { auth: t.admin.api_key }),
          t.api.post('/v1/users', {
            auth: t.admin.api_key,
            form: { username: `race-user-${i}`, group_ids: g },
          }),
        ])
        seen.push(...res.map((r) => r.statusCode))
        const [add, update, del, create] = res
        expect(del?.statusCode).toBe(200)
        expect([200, 404]).toContain(add?.statusCode)
        expect([200, 404]).toContain(update?.statusCode)
        expect([200, 400]).toContain(create?.statusCode)
      }
      expect(seen.every((s) => s < 500)).toBe(true)
    })

    // Probed, not a defect (reliability R-18a): concurrent APPENDs all land.
    it('parallel APPENDs of distinct users to one group all land', async () => {
      const g = (
        await t.api.post('/v1/groups', { auth: t.admin.api_key, form: { name: 'append-race' } })
      ).json().group.id
      const members = await Promise.all(Array.from({ length: 20 }, () => createUser(t)))
      const res = await Promise.all(
        members.map((m, i) =>
          i % 2
            ? t.api.put(`/v1/groups/${g}`, { auth: t.admin.api_key, json: { user_ids: [m.id] } })
            : t.api.post(`/v1/groups/${g}/membership`, {
                auth: t.admin.api_key,
                json: { user_ids: [m.id] },
              }),
        ),
      )
      expect(res.every((r) => r.statusCode === 200)).toBe(true)
      const read = await t.api.get(`/v1/groups/${g}?full=true`, { auth: t.admin.api_key })
      expect(read.json().group.user_ids.sort()).toEqual(members.map((m) => m.id).sort())
    })

    it('two parallel creates of one username: one wins, the other is a 400', async () => {
      for (let i = 0; i < 5; i++) {
        const name = `same-name-${i}`
        const res = await Promise.all(
          Array.from({ length: 6 }, () =>
            t.api.post('/v1/users', { auth: t.admin.api_key, form: { username: name } }),
          ),
        )
        expect(countCodes(res.map((r) => r.statusCode))).toEqual({ 200: 1, 400: 5 })
      }
    })
  })

  describe('precompiled queries', () => {
    // Probed, not a defect: parameters are bound per call, never shared between calls.
    it('keep each call’s parameters apart under concurrency and inside transactions', async () => {
      const users = await Promise.all(Array.from({ length: 8 }, () => createUser(t)))
      const accountId = t.admin.account_id
      const lookups = Array.from({ length: 200 }, (_, i) => users[i % users.length]?.id as string)
      const rows = await Promise.all(
        lookups.map((id) => usersRepo.findById(t.deps.store.db, accountId, id)),
      )
      expect(rows.map((r) => r?.id)).toEqual(lookups)
      const inTrx = await t.deps.store.db.transaction().execute(async (trx) => {
        const out: (string | undefined)[] = []
        for (const id of lookups.slice(0, 16))
          out.push((await usersRepo.findById(trx, accountId, id))?.id)
        return out
      })
      expect(inTrx).toEqual(lookups.slice(0, 16))
      expect(await usersRepo.findById(t.deps.store.db, accountId, newId())).toBeUndefined()
    })
  })
})

describe.skipIf(testDialect !== 'sqlite')('first start', () => {
  const run = promisify(execFile)
  const dir = mkdtempSync(join(tmpdir(), 'coffer-review-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  // Was: the account and admin were created first, then the existing file made the server
  // refuse to start; the next start saw an account and never wrote the admin's credentials.
  it('refuses to bootstrap over an existing credentials file without creating anything', async () => {
    writeFileSync(join(dir, 'bootstrap-credentials.json'), '{}\n')
    const env: NodeJS.ProcessEnv = { ...process.env }
    for (const k of Object.keys(env)) if (k.startsWith('COFFER_')) delete env[k]
    const started = run(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve'], {
      env: {
        ...env,
        COFFER_DATA_DIR: dir,
        COFFER_PORT: '0',
        COFFER_SERVE: 'api',
        COFFER_LOG_LEVEL: 'silent',
        COFFER_ENV_FILE: 'none',
      },
      timeout: 20_000,
    })
    await expect(started).rejects.toMatchObject({ code: 1 })
    const db = openCofferSqliteFile(join(dir, 'coffer.db'), { readonly: true })
    try {
      expect(db.prepare('select count(*) as n from accounts').get()).toEqual({ n: 0 })
    } finally {
      db.close()
    }
  })
})
