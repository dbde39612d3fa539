import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import {
  claimSlot,
  recordFailure,
  recordSuccess,
} from '../../src/modules/backup/backup-schedule.repo.js'
import { buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

/**
 * GET /v1/backups/status (issue 22): the deployment's backup settings, next planned run and last
 * outcome, for an API key or access token whose policy grants R on `Backups::` (the bootstrap
 * admin group has it); anyone else is refused, a SAT always (decisions 248).
 */

const clock = new ManualClock('2031-03-04T02:59:30.000Z')
let t: TestApp
let bare: TestApp

beforeAll(async () => {
  t = await buildTestApp({
    clock,
    backupSchedule: {
      schedule: '0 3 * * *',
      target: { kind: 's3', bucket: 'coffer-backups', prefix: 'nightly' },
      keep: 5,
    },
  })
  bare = await buildTestApp({ clock })
}, 60_000)

afterAll(async () => {
  await t?.close()
  await bare?.close()
})

const status = (app: TestApp, o: Parameters<TestApp['api']['get']>[1] = {}) =>
  app.api.get('/v1/backups/status', o)

describe('GET /v1/backups/status', () => {
  it('no schedule, no backup yet: the settings say so', async () => {
    const res = await status(bare, { auth: bare.admin.api_key })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().backup).toEqual({
      schedule: null,
      target: null,
      keep: 7,
      next_run_at: null,
      running: false,
      last_success: null,
      last_failure: null,
      failures: 0,
    })
  })

  it('the schedule, the next planned run, the last success and failure (no credentials shown)', async () => {
    const db = t.deps.store.db
    const now = clock.now()
    const claim = (holder: string, slot: string) =>
      claimSlot(db, {
        slot,
        holder,
        now: now.toISOString(),
        leaseUntil: new Date(now.getTime() + 60_000).toISOString(),
      })
    expect(await claim('node-a', '2031-03-03T03:00:00.000Z')).toBe(true)
    let res = await status(t, { auth: t.admin.api_key })
    expect(res.json().backup.running).toBe(true)
    await recordSuccess(db, 'node-a', {
      at: '2031-03-03T03:00:09.000Z',
      size: 123_456,
      target: 's3://coffer-backups/nightly/coffer-backup-20310303T030000Z.cbk',
    })
    expect(await claim('node-b', '2031-03-04T03:00:00.000Z')).toBe(true)
    await recordFailure(db, 'node-b', {
      at: '2031-03-04T03:00:01.000Z',
      error: `connect to postgres://coffer:hunter2@db.internal:5432/coffer failed ${'x'.repeat(900)}`,
    })
    res = await status(t, { auth: t.admin.api_key })
    expect(res.statusCode, res.body).toBe(200)
    const backup = res.json().backup
    expect(backup).toMatchObject({
      schedule: '0 3 * * *',
      target: 's3://coffer-backups/nightly',
      keep: 5,
      next_run_at: '2031-03-04T03:00:00.000Z',
      running: false,
      last_success: {
        at: '2031-03-03T03:00:09.000Z',
        size_bytes: 123_456,
        location: 's3://coffer-backups/nightly/coffer-backup-20310303T030000Z.cbk',
      },
      failures: 1,
    })
    expect(backup.last_failure.at).toBe('2031-03-04T03:00:01.000Z')
    expect(backup.last_failure.message).toMatch(/^connect to postgres:\/\/\*\*\*@db\.internal/)
    expect(backup.last_failure.message).not.toContain('hunter2')
    expect(backup.last_failure.message.length).toBe(500)
  })

  it('refuses a caller without credentials (401)', async () => {
    const res = await status(t)
    expect(res.statusCode).toBe(401)
    expect(errorOf(res).code).toBe('UNAUTHENTICATED')
  })

  it('needs R on Backups::: others are refused (401 PERMISSION_DENIED); the grant works alone', async () => {
    const plain = await createUser(t, {
      policy: [{ Resources: ['Vault::.*'], Activities: 'CRUD' }],
    })
    for (const auth of [plain.apiKey, plain.accessToken]) {
      const res = await status(t, { auth })
      expect(res.statusCode).toBe(401)
      expect(errorOf(res).code).toBe('PERMISSION_DENIED')
    }
    const writer = await createUser(t, {
      policy: [{ Resources: ['Backups::'], Activities: 'CUD' }],
    })
    expect((await status(t, { auth: writer.apiKey })).statusCode).toBe(401)
    const reader = await createUser(t, { policy: [{ Resources: ['Backups::'], Activities: 'R' }] })
    for (const auth of [reader.apiKey, reader.accessToken]) {
      const res = await status(t, { auth })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json().backup.schedule).toBe('0 3 * * *')
    }
  })

  it('refuses a SAT, even one whose policy grants Backups:: (401 CREDENTIAL_NOT_ALLOWED)', async () => {
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'backups',
        policy: [{ Resources: ['Backups::'], Activities: 'R' }],
        not_valid_after: new Date(clock.now().getTime() + 3_600_000).toISOString(),
      },
    })
    expect(sat.statusCode, sat.body).toBe(200)
    const res = await status(t, { basic: sat.json().scoped_access_token.http_auth })
    expect(res.statusCode).toBe(401)
    expect(errorOf(res).code).toBe('CREDENTIAL_NOT_ALLOWED')
  })
})
