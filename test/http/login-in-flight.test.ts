import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createUser, type TestApp, type TestAppOptions } from '../helpers/app.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { testDialect } from '../helpers/store.js'

/**
 * Issue 12, point 9b: attempts are counted before their password is checked (so guesses are
 * limited before any hashing), but right passwords in flight must never count as failures.
 * Real sockets: the concurrency is real.
 */
const PASSWORD = 'correct horse battery'
const HOUR = 3_600_000
const generous = { max: 1_000_000, windowMs: HOUR }

let server: TestServer | undefined
afterEach(async () => {
  vi.restoreAllMocks()
  await server?.close()
  server = undefined
})

async function start(options: TestAppOptions): Promise<{ t: TestApp; base: string }> {
  server = await startTestServer(options)
  const { port } = server.testApp.app.server.address() as AddressInfo
  return { t: server.testApp, base: `http://127.0.0.1:${port}` }
}

async function login(base: string, form: Record<string, string>) {
  const res = await fetch(`${base}/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form),
  })
  const body = (await res.json()) as { error?: { code: string; message: string } }
  return { status: res.status, body, retryAfter: res.headers.get('retry-after') }
}

describe(`logins in flight (${testDialect})`, () => {
  it('200 concurrent right logins of one user from one address all succeed', async () => {
    const { t, base } = await start({
      hashingLimits: { maxConcurrent: 2, maxQueued: 1_000 },
      // 20 rounds of 10 logins in flight take a few seconds on a loaded machine: wait long enough.
      loginLimits: {
        perAddress: { max: 50, windowMs: 15 * 60_000 },
        global: generous,
        inFlightWaitMs: 30_000,
      },
    })
    const user = await createUser(t, { password: PASSWORD })
    // Each check takes a while (as argon2 does at production cost), so the logins overlap.
    const verify = t.deps.hasher.verify.bind(t.deps.hasher)
    vi.spyOn(t.deps.hasher, 'verify').mockImplementation(async (...args) => {
      await new Promise((r) => setTimeout(r, 100))
      return verify(...args)
    })
    const form = { account_id: t.admin.account_id, username: user.username, password: PASSWORD }
    const replies = await Promise.all(Array.from({ length: 200 }, () => login(base, form)))
    expect(replies.filter((r) => r.status !== 200)).toEqual([])
    // Nothing is left counted or in flight.
    const rows = await t.deps.store.db
      .selectFrom('login_throttle')
      .select(['failures', 'in_flight'])
      .execute()
    for (const row of rows) expect(row).toEqual({ failures: 0, in_flight: 0 })
  }, 120_000)

  it('a concurrent flood of wrong passwords still gets only 10 hashed, then 429', async () => {
    const { t, base } = await start({
      hashingLimits: { maxConcurrent: 2, maxQueued: 1_000 },
      loginLimits: { perAddress: { max: 1_000, windowMs: 15 * 60_000 }, global: generous },
    })
    const user = await createUser(t, { password: PASSWORD })
    const verify = vi.spyOn(t.deps.hasher, 'verify')
    const form = { account_id: t.admin.account_id, username: user.username, password: 'wrong!' }
    const replies = await Promise.all(Array.from({ length: 60 }, () => login(base, form)))
    const statuses = replies.map((r) => r.status)
    // The per-(user, client) limit is 10 failures: 10 are checked, every other one refused.
    expect(statuses.filter((s) => s === 401)).toHaveLength(10)
    expect(statuses.filter((s) => s === 429)).toHaveLength(50)
    expect(verify).toHaveBeenCalledTimes(10)
    // And the right password is refused too now (the window is spent by failures).
    const right = await login(base, { ...form, password: PASSWORD })
    expect(right.status).toBe(429)
  }, 120_000)

  it('a login that waits for in-flight ones longer than COFFER_LOGIN_IN_FLIGHT_WAIT_MS gets 503', async () => {
    const { t, base } = await start({
      hashingLimits: { maxConcurrent: 2, maxQueued: 1_000 },
      loginLimits: {
        perAddress: { max: 1_000, windowMs: 15 * 60_000 },
        global: generous,
        inFlightWaitMs: 300,
      },
    })
    const user = await createUser(t, { password: PASSWORD })
    const verify = t.deps.hasher.verify.bind(t.deps.hasher)
    // Hashing that takes 1.5 s: 10 in flight fill the per-client window for that long.
    vi.spyOn(t.deps.hasher, 'verify').mockImplementation(async (...args) => {
      await new Promise((r) => setTimeout(r, 1_500))
      return verify(...args)
    })
    const form = { account_id: t.admin.account_id, username: user.username, password: PASSWORD }
    const slow = Array.from({ length: 10 }, () => login(base, form))
    await new Promise((r) => setTimeout(r, 200))
    const eleventh = await login(base, form)
    expect(eleventh.status).toBe(503)
    expect(eleventh.retryAfter).toBe('1')
    expect(eleventh.body.error?.code).toBe('SERVER_BUSY')
    expect((await Promise.all(slow)).map((r) => r.status)).toEqual(Array(10).fill(200))
    // Once they settled, there is room again at once.
    expect((await login(base, form)).status).toBe(200)
  }, 60_000)

  it('a login whose in-flight wait is long enough gets through once those settle', async () => {
    const { t, base } = await start({
      hashingLimits: { maxConcurrent: 2, maxQueued: 1_000 },
      loginLimits: {
        perAddress: { max: 1_000, windowMs: 15 * 60_000 },
        global: generous,
        inFlightWaitMs: 5_000,
      },
    })
    const user = await createUser(t, { password: PASSWORD })
    const verify = t.deps.hasher.verify.bind(t.deps.hasher)
    vi.spyOn(t.deps.hasher, 'verify').mockImplementation(async (...args) => {
      await new Promise((r) => setTimeout(r, 1_500))
      return verify(...args)
    })
    const form = { account_id: t.admin.account_id, username: user.username, password: PASSWORD }
    const slow = Array.from({ length: 10 }, () => login(base, form))
    await new Promise((r) => setTimeout(r, 200))
    expect((await login(base, form)).status).toBe(200)
    expect((await Promise.all(slow)).map((r) => r.status)).toEqual(Array(10).fill(200))
  }, 60_000)
})
