import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { defaultHashingLimits } from '../../src/crypto/passwords.js'
import { digestSecret } from '../../src/crypto/secrets.js'
import { ManualClock } from '../../src/lib/clock.js'
import type { LoginLimits } from '../../src/modules/auth/login-throttle.js'
import { basicHeader, createUser, type TestApp, type TestAppOptions } from '../helpers/app.js'
import { bytes } from '../helpers/blob-harness.js'
import { startTestServer, type TestServer } from '../helpers/server.js'

/**
 * Security review, finding 3: an anonymous login flood (random usernames) must neither escape the
 * login limits nor starve file I/O of libuv threads. Real sockets throughout: the pool is real.
 */
const PASSWORD = 'correct horse battery'
const HOUR = 3_600_000
const generous = { max: 1_000_000, windowMs: HOUR }
/** Costly enough that hashes are still running when the next request arrives. */
const SLOW_ARGON2 = { memoryCost: 19_456, timeCost: 8 }

interface Reply {
  status: number
  retryAfter: string | null
  body: { result: string; error?: { type: string; code: string; message: string } }
}

let server: TestServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function start(options: TestAppOptions): Promise<{ t: TestApp; base: string }> {
  server = await startTestServer(options)
  const { port } = server.testApp.app.server.address() as AddressInfo
  return { t: server.testApp, base: `http://127.0.0.1:${port}` }
}

const randomName = () => `nobody-${Math.random().toString(36).slice(2)}`

async function login(
  base: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await fetch(`${base}/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(form),
  })
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: (await res.json()) as Reply['body'],
  }
}

describe('login flood', () => {
  it('limits one client address whatever usernames it tries, before any hashing', async () => {
    const clock = new ManualClock('2026-03-01T00:00:00.000Z')
    const loginLimits: LoginLimits = {
      perAddress: { max: 5, windowMs: 15 * 60_000 },
      global: generous,
    }
    const { t, base } = await start({ clock, loginLimits })
    const user = await createUser(t, { password: PASSWORD })
    const bad = () => ({ account_id: t.admin.account_id, username: randomName(), password: 'x' })
    const verify = vi.spyOn(t.deps.hasher, 'verify')
    for (let i = 0; i < 5; i++) expect((await login(base, bad())).status).toBe(401)
    expect(verify).toHaveBeenCalledTimes(5)
    // The sixth attempt — even the right password of a real user — is refused unhashed.
    const good = { account_id: t.admin.account_id, username: user.username, password: PASSWORD }
    const limited = await login(base, good)
    expect(limited.status).toBe(429)
    expect(limited.retryAfter).toBe('900')
    expect(limited.body).toMatchObject({
      result: 'error',
      error: { type: 'rate_limit_error', code: 'TOO_MANY_ATTEMPTS' },
    })
    expect(verify).toHaveBeenCalledTimes(5)
    clock.advance(15 * 60_000)
    expect((await login(base, good)).status).toBe(200)
  })

  it('caps failures of the whole server, sparing clients that logged in to the user before', async () => {
    const clock = new ManualClock('2026-03-01T00:00:00.000Z')
    const loginLimits: LoginLimits = { perAddress: generous, global: { max: 5, windowMs: 60_000 } }
    const { t, base } = await start({ clock, loginLimits })
    const known = await createUser(t, { password: PASSWORD })
    const other = await createUser(t, { password: PASSWORD })
    const good = (username: string) => ({
      account_id: t.admin.account_id,
      username,
      password: PASSWORD,
    })
    // A success does not use up the budget, and makes this client a known one of `known`.
    expect((await login(base, good(known.username))).status).toBe(200)
    const verify = vi.spyOn(t.deps.hasher, 'verify')
    const bad = () => ({ account_id: t.admin.account_id, username: randomName(), password: 'x' })
    for (let i = 0; i < 5; i++) expect((await login(base, bad())).status).toBe(401)
    expect(verify).toHaveBeenCalledTimes(5)
    const limited = await login(base, bad())
    expect(limited.status).toBe(429)
    expect(limited.retryAfter).toBe('60')
    expect(limited.body.error).toMatchObject({ type: 'rate_limit_error' })
    expect(verify).toHaveBeenCalledTimes(5)
    // This client still gets in to the user it logged in to before, not to another one.
    expect((await login(base, good(known.username))).status).toBe(200)
    expect((await login(base, good(other.username))).status).toBe(429)
    expect(verify).toHaveBeenCalledTimes(6)
    clock.advance(60_000)
    expect((await login(base, good(other.username))).status).toBe(200)
  })

  it('once a budget is seen spent, refuses further flood attempts without a database write', async () => {
    const clock = new ManualClock('2026-03-01T00:00:00.000Z')
    const loginLimits: LoginLimits = { perAddress: generous, global: { max: 3, windowMs: 60_000 } }
    const { t, base } = await start({ clock, loginLimits })
    const bad = () => ({ account_id: t.admin.account_id, username: randomName(), password: 'x' })
    const globalCount = async () =>
      Number(
        (
          await t.deps.store.db
            .selectFrom('login_throttle')
            .select('failures')
            .where('key', '=', digestSecret('global-login-failures'))
            .executeTakeFirstOrThrow()
        ).failures,
      )
    for (let i = 0; i < 3; i++) expect((await login(base, bad())).status).toBe(401)
    expect((await login(base, bad())).status).toBe(429)
    const counted = await globalCount()
    // Ten more guesses: refused from memory, each with the window's Retry-After, nothing written.
    for (let i = 0; i < 10; i++) {
      const refused = await login(base, bad())
      expect(refused.status).toBe(429)
      expect(refused.retryAfter).toBe('60')
    }
    expect(await globalCount()).toBe(counted)
    // The window ends: the memory does not outlive it.
    clock.advance(60_000)
    expect((await login(base, bad())).status).toBe(401)
  })

  it('holds a refused login before answering, so a flood client cannot resend at once', async () => {
    const { t, base } = await start({
      loginLimits: { perAddress: { max: 1, windowMs: HOUR }, global: generous },
      loginRefusalDelayMs: 300,
    })
    const bad = () => ({ account_id: t.admin.account_id, username: randomName(), password: 'x' })
    expect((await login(base, bad())).status).toBe(401)
    const started = performance.now()
    expect((await login(base, bad())).status).toBe(429)
    // A lower bound only: the answer cannot come before the delay, however fast the machine.
    expect(performance.now() - started).toBeGreaterThanOrEqual(290)
  })

  it('answers 503 with Retry-After when every hashing slot and queue place is taken', async () => {
    const { t, base } = await start({
      argon2: SLOW_ARGON2,
      hashingLimits: { maxConcurrent: 1, maxQueued: 1 },
      loginLimits: { perAddress: generous, global: generous },
    })
    const bad = () => ({ account_id: t.admin.account_id, username: randomName(), password: 'x' })
    // The dummy hash for unknown users is made once; make it before the slots are measured.
    expect((await login(base, bad())).status).toBe(401)
    const first = [login(base, bad()), login(base, bad())]
    await vi.waitFor(() => expect(t.deps.hasher.load()).toEqual({ running: 1, queued: 1 }), {
      timeout: 10_000,
      interval: 2,
    })
    const counters = () =>
      t.deps.store.db
        .selectFrom('login_throttle')
        .select((eb) => eb.fn.sum<number>('failures').as('n'))
        .executeTakeFirstOrThrow()
        .then((r) => Number(r.n))
    const countedBefore = await counters()
    const refused = await login(base, bad())
    expect(refused.status).toBe(503)
    // Shed before any database write: the refused attempt was never counted.
    expect(await counters()).toBe(countedBefore)
    expect(refused.retryAfter).toBe('1')
    expect(refused.body).toMatchObject({
      result: 'error',
      error: { type: 'service_unavailable', code: 'SERVER_BUSY' },
    })
    // Every argon2 user shares the gate: creating a user with a password is refused alike.
    const created = await fetch(`${base}/v1/users`, {
      method: 'POST',
      headers: {
        authorization: basicHeader(t.admin.api_key),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ username: randomName(), password: PASSWORD }),
    })
    expect(created.status).toBe(503)
    expect(created.headers.get('retry-after')).toBe('1')
    expect((await Promise.all(first)).map((r) => r.status)).toEqual([401, 401])
    expect(t.deps.hasher.load()).toEqual({ running: 0, queued: 0 })
  })

  it('serves a BLOB download while a flood keeps the hashing slots full', async () => {
    const FLOOD = 24
    const { t, base } = await start({
      argon2: SLOW_ARGON2,
      hashingLimits: defaultHashingLimits(),
      loginLimits: { perAddress: generous, global: generous },
    })
    const authorization = basicHeader(t.admin.api_key)
    const vault = await fetch(`${base}/v1/vaults`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ name: 'flood' }),
    })
    const vaultId = ((await vault.json()) as { vault: { id: string } }).vault.id
    const content = bytes(2 * 1024 * 1024, 3)
    const form = new FormData()
    form.append('file', new Blob([content]), 'two-mib.bin')
    const up = await fetch(`${base}/v1/vaults/${vaultId}/blobs`, {
      method: 'POST',
      headers: { authorization },
      body: form,
    })
    const blobId = ((await up.json()) as { blob_id: string }).blob_id
    const bad = () => ({ account_id: t.admin.account_id, username: randomName(), password: 'x' })
    expect((await login(base, bad())).status).toBe(401)

    const verify = vi.spyOn(t.deps.hasher, 'verify')
    let answered = 0
    const flood = Array.from({ length: FLOOD }, () =>
      login(base, bad()).then((r) => {
        answered++
        return r.status
      }),
    )
    // Every flood request has reached its password check before the download starts.
    await vi.waitFor(() => expect(verify).toHaveBeenCalledTimes(FLOOD), {
      timeout: 10_000,
      interval: 2,
    })
    const down = await fetch(`${base}/v1/vaults/${vaultId}/blobs/${blobId}`, {
      headers: { authorization },
    })
    const body = Buffer.from(await down.arrayBuffer())
    const answeredWhenServed = answered
    expect(down.status).toBe(200)
    expect(body.equals(content)).toBe(true)
    // The file was read on threads the hashes could not take: the download did not wait for the
    // flood. Unbounded, all 24 hashes queue ahead of the file reads and finish first.
    expect(answeredWhenServed).toBeLessThan(FLOOD / 2)
    expect(await Promise.all(flood)).toEqual(Array(FLOOD).fill(401))
  })
})
