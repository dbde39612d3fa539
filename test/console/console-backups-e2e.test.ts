import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  claimSlot,
  recordFailure,
  recordSuccess,
} from '../../src/modules/backup/backup-schedule.repo.js'
import { loadConsoleAssets } from '../../src/modules/console/console.assets.js'
import { createUser } from '../helpers/app.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectAccessible, HAS_CHROMIUM, launch, screenshot, watchPage } from './browser.js'
import { ensureConsoleBuilt } from './build.js'

/**
 * Issue 22: the Backups page in Chromium shows what GET /v1/backups/status answers — the
 * schedule, target and kept count, the next planned run, the last success (time, size) and the
 * last failure (time, message without credentials). A user without `Backups::` R has no such
 * page.
 */
let server: TestServer
let browser: Browser
let page: Page
let problems: string[]

beforeAll(async () => {
  if (!HAS_CHROMIUM) return
  const dist = await ensureConsoleBuilt()
  server = await startTestServer({
    consoleAssets: loadConsoleAssets(dist),
    backupSchedule: {
      schedule: '0 3 * * *',
      target: { kind: 'folder', path: '/var/backups/coffer' },
      keep: 14,
    },
  })
  browser = await launch()
  page = await browser.newPage()
  page.setDefaultTimeout(10_000)
  problems = watchPage(page)
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.close()
})

async function signIn(username: string, password: string) {
  await page.goto(`${server.url}/console/`)
  await page.getByLabel('Account id').fill(server.admin.account_id)
  await page.getByLabel('Username').fill(username)
  await page.getByLabel('Password').fill(password)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
  await page.getByRole('heading', { level: 1, name: 'Users' }).waitFor()
}

const cell = (table: string, row: string) =>
  page.locator(`table[aria-label="${table}"] tr:has(th:text-is("${row}")) td`)

describe.skipIf(!HAS_CHROMIUM)('the backups page', () => {
  it('shows the schedule, the next run and the last outcome as the API answers them', async () => {
    const t = server.testApp
    const db = t.deps.store.db
    const now = new Date()
    const lease = (holder: string, slot: string) =>
      claimSlot(db, {
        slot,
        holder,
        now: now.toISOString(),
        leaseUntil: new Date(now.getTime() + 60_000).toISOString(),
      })
    expect(await lease('node-a', '2026-01-01T03:00:00.000Z')).toBe(true)
    await recordSuccess(db, 'node-a', {
      at: '2026-01-01T03:00:07.000Z',
      size: 3 * 1024 * 1024 + 512 * 1024,
      target: '/var/backups/coffer/coffer-backup-20260101T030000Z.cbk',
    })
    expect(await lease('node-b', '2026-01-02T03:00:00.000Z')).toBe(true)
    await recordFailure(db, 'node-b', {
      at: '2026-01-02T03:00:02.000Z',
      error: 'S3 at https://backup:s3cret@store.example failed: SlowDown',
    })
    const api = (await t.api.get('/v1/backups/status', { auth: t.admin.api_key })).json().backup

    await signIn(t.admin.username, t.admin.password)
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Backups' })
      .click()
    await page.getByRole('heading', { level: 1, name: 'Backups' }).waitFor()
    await cell('Schedule', 'Schedule').waitFor()
    expect(await cell('Schedule', 'Schedule').textContent()).toContain('0 3 * * *')
    expect(await cell('Schedule', 'Target').textContent()).toBe('/var/backups/coffer')
    expect(await cell('Schedule', 'Kept').textContent()).toBe('newest 14')
    expect(await cell('Schedule', 'Next run').textContent()).toBe(
      `${api.next_run_at.slice(0, 19).replace('T', ' ')} UTC`,
    )
    expect(await cell('Last outcome', 'Last success').textContent()).toBe(
      '2026-01-01 03:00:07 UTC, 3.5 MiB /var/backups/coffer/coffer-backup-20260101T030000Z.cbk',
    )
    const failure = await cell('Last outcome', 'Last failure').textContent()
    expect(failure).toBe(
      '2026-01-02 03:00:02 UTC: S3 at https://***@store.example failed: SlowDown',
    )
    expect(failure).not.toContain('s3cret')
    expect(await cell('Last outcome', 'Failures').textContent()).toBe('1')
    await expectAccessible(page, 'backups')
    await screenshot(page, 'backups')

    // Without Backups:: R there is no Backups page, and its address says so.
    await createUser(t, {
      username: 'erin',
      password: 'erin-password-1',
      policy: [{ Resources: ['User::.*'], Activities: 'R' }],
    })
    await page.evaluate(() =>
      (globalThis as unknown as { sessionStorage: { clear(): void } }).sessionStorage.clear(),
    )
    await signIn('erin', 'erin-password-1')
    expect(
      await page
        .getByRole('navigation', { name: 'Main' })
        .getByRole('link', { name: 'Backups' })
        .count(),
    ).toBe(0)
    await page.goto(`${server.url}/console/backups`)
    await page.getByRole('heading', { level: 1, name: 'Not available' }).waitFor()
    expect(problems.filter((p) => !p.includes('401'))).toEqual([])
  }, 60_000)
})
