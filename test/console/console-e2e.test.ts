import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ManualClock } from '../../src/lib/clock.js'
import { loadConsoleAssets } from '../../src/modules/console/console.assets.js'
import { CONSOLE_CSP } from '../../src/modules/console/console.routes.js'
import { basicHeader } from '../helpers/app.js'
import { appCode, mfaPath, STEP_MS } from '../helpers/mfa.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectAccessible, HAS_CHROMIUM, launch, screenshot, watchPage } from './browser.js'
import { ensureConsoleBuilt } from './build.js'

/**
 * Issue 15, end to end: the console in a real headless Chromium against a real server on a
 * socket. One browser and one page for the whole file; each step goes on from the last, and
 * each checks what the console shows against what the API itself answers.
 */
let server: TestServer
let browser: Browser
let page: Page
let problems: string[]
const clock = new ManualClock(new Date())
const carol = { username: 'carol', password: 'carol-password-1', id: '', apiKey: '' }
const ids = { vault: '', schema: '', document: '', group: '' }

beforeAll(async () => {
  if (!HAS_CHROMIUM) return
  const dist = await ensureConsoleBuilt()
  server = await startTestServer({ clock, consoleAssets: loadConsoleAssets(dist) })
  browser = await launch()
  const context = await browser.newContext({ acceptDownloads: true })
  page = await context.newPage()
  // A missing element fails its step in seconds, not at the test's timeout.
  page.setDefaultTimeout(10_000)
  problems = watchPage(page)
  // Every destructive action asks first: the test says yes.
  page.on('dialog', (d) => void d.accept())
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.close()
})

const api = () => server.testApp.api
const admin = () => server.admin
const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name })
const field = (form: string, name: string) =>
  page.locator(`form[aria-label="${form}"] .field:has([name="${name}"])`)

async function signIn(username: string, password: string): Promise<void> {
  await page.goto(`${server.url}/console/`)
  await page.getByLabel('Account id').fill(admin().account_id)
  await page.getByLabel('Username').fill(username)
  await page.getByLabel('Password').fill(password)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
}

async function nav(label: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label }).click()
}

/** The focused element as `TAG:name` (inputs) or `TAG:text`. */
const focused = () =>
  page.evaluate(() => {
    const doc = (globalThis as unknown as { document: { activeElement: HTMLish | null } }).document
    const e = doc.activeElement
    return e ? `${e.tagName}:${e.getAttribute('name') ?? e.textContent}` : ''
  })
interface HTMLish {
  tagName: string
  textContent: string | null
  getAttribute(name: string): string | null
}

const sessionToken = () =>
  page.evaluate(() => {
    const storage = (
      globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }
    ).sessionStorage
    const text = storage.getItem('coffer.console.session')
    return text ? (JSON.parse(text) as { token: string }).token : null
  })

describe.skipIf(!HAS_CHROMIUM)('the console in Chromium', () => {
  it('the sign-in page carries the CSP and framing headers and passes axe', async () => {
    const response = await page.goto(`${server.url}/console/`)
    const headers = response?.headers() ?? {}
    expect(headers['content-security-policy']).toBe(CONSOLE_CSP)
    expect(headers['x-frame-options']).toBe('DENY')
    expect(headers['x-content-type-options']).toBe('nosniff')
    expect(headers['referrer-policy']).toBe('no-referrer')
    await expect.poll(() => heading('Coffer console').count()).toBe(1)
    await expectAccessible(page, 'sign-in')
    await screenshot(page, 'sign-in')
  })

  it('a wrong password shows the API refusal; the admin then signs in (no MFA)', async () => {
    await signIn(admin().username, 'not-the-password')
    await expect.poll(() => page.getByRole('alert').first().textContent()).toContain('LOGIN_FAILED')
    await signIn(admin().username, admin().password)
    await heading('Users').waitFor()
    // Keyboard: each page's heading takes the focus, Tab goes on into the page, links open
    // pages with Enter.
    await expect.poll(focused).toBe('H1:Users')
    await page.keyboard.press('Tab')
    await expect.poll(focused).toBe('INPUT:q')
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Groups' })
      .focus()
    await page.keyboard.press('Enter')
    await heading('Groups').waitFor()
    await expect.poll(focused).toBe('H1:Groups')
    await nav('Users')
    await heading('Users').waitFor()
    const token = await sessionToken()
    expect(token).toBeTruthy()
    const me = await api().get('/v1/auth/me', { auth: token as string })
    expect(me.json().user.username).toBe(admin().username)
  })

  it('creating a user: the field the API names shows its message; then the user is created', async () => {
    const form = 'Create a user'
    await page.locator(`form[aria-label="${form}"] button[type=submit]`).click()
    const usernameError = field(form, 'username').locator('.field-error')
    await expect.poll(() => usernameError.textContent()).toMatch(/^username /)
    // A JSON editor refuses what is not JSON before anything is sent.
    await field(form, 'attributes').locator('textarea').fill('{"team": ')
    await expect
      .poll(() => field(form, 'attributes').locator('.field-error').textContent())
      .toContain('Attributes is not valid JSON')
    expect(await page.locator(`form[aria-label="${form}"] button[type=submit]`).isDisabled()).toBe(
      true,
    )
    await field(form, 'attributes').locator('textarea').fill('{"team": "blue"}')
    await field(form, 'username').locator('input').fill(carol.username)
    await field(form, 'password').locator('input').fill(carol.password)
    await page.locator(`form[aria-label="${form}"] button[type=submit]`).click()
    const secret = page.locator('[data-secret]')
    await secret.waitFor()
    carol.apiKey = (await secret.textContent()) ?? ''
    const me = await api().get('/v1/auth/me', { auth: carol.apiKey })
    expect(me.statusCode).toBe(200)
    carol.id = me.json().user.id
    expect(me.json().user.username).toBe('carol')
    await page.getByRole('link', { name: 'carol' }).waitFor()
    await expectAccessible(page, 'users')
    await screenshot(page, 'users')
  })

  it("editing a user's attributes with the JSON editor", async () => {
    await page.getByRole('link', { name: 'carol' }).click()
    await heading('User carol').waitFor()
    await page.getByLabel('Attributes').fill('{"team": "red", "level": 2}')
    await page.getByRole('button', { name: 'Save' }).click()
    await page.getByText('Saved.').waitFor()
    const res = await api().get(`/v2/users/${carol.id}`, {
      auth: admin().api_key,
      query: { full: 'true' },
    })
    expect(res.json().users[0].attributes).toEqual({ team: 'red', level: 2 })
    await expectAccessible(page, 'user')
    await screenshot(page, 'user')
  })

  it('a group with a policy: the editor checks it as the server does and explains it', async () => {
    await nav('Groups')
    await heading('Groups').waitFor()
    const form = 'Create a group'
    await field(form, 'name').locator('input').fill('readers')
    const policy = field(form, 'policy').locator('textarea')
    await policy.fill('[{"Resources": ["Vault::.*"], "Activities": "X"}]')
    await expect
      .poll(() => field(form, 'policy').locator('.field-error').textContent())
      .toContain('policy[0].Activities must be a string of the letters C, R, U, D')
    await policy.fill(
      '[{"Resources": ["Vault::.*"], "Activities": "R"}, {"Resources": ["Vault::.*::Document::.*"], "Activities": "R"}]',
    )
    await page.getByText('Allows read on: any Document in any Vault').waitFor()
    await expectAccessible(page, 'groups')
    await screenshot(page, 'groups')
    await page.locator(`form[aria-label="${form}"] button[type=submit]`).click()
    await heading('Group readers').waitFor()
    ids.group = page.url().split('/').pop() as string
    await page.getByLabel('User id to add').fill(carol.id)
    await page.getByRole('button', { name: 'Add member' }).click()
    await page.getByRole('button', { name: `Remove member ${carol.id}` }).waitFor()
    await page.getByRole('link', { name: 'carol' }).waitFor()
    const group = await api().get(`/v1/groups/${ids.group}`, {
      auth: admin().api_key,
      query: { full: 'true' },
    })
    expect(group.json().group.name).toBe('readers')
    expect(group.json().group.user_ids).toEqual([carol.id])
    expect(group.json().group.policy).toHaveLength(2)
    // Renamed through the same form.
    await page
      .locator('form[aria-label="Rename the group and edit its policy"] input[name=name]')
      .fill('team-readers')
    await page.getByRole('button', { name: 'Save group' }).click()
    await heading('Group team-readers').waitFor()
    const renamed = await api().get(`/v1/groups/${ids.group}`, { auth: admin().api_key })
    expect(renamed.json().group.name).toBe('team-readers')
    await expectAccessible(page, 'group')
    await screenshot(page, 'group')
  })

  it('a vault, a schema, and a document created, edited and given an owner', async () => {
    await nav('Vaults')
    await heading('Vaults').waitFor()
    await expectAccessible(page, 'vaults')
    await screenshot(page, 'vaults')
    await page.locator('form[aria-label="Create a vault"] input[name=name]').fill('main')
    await page.getByRole('button', { name: 'Create vault' }).click()
    await heading('Vault main').waitFor()
    ids.vault = page.url().split('/').pop() as string
    await nav('Schemas & search')
    await heading('Schemas & search').waitFor()
    await page.getByRole('button', { name: 'Create schema' }).click()
    await page.getByRole('heading', { name: 'Search people' }).waitFor()
    const schemas = await api().get(`/v1/vaults/${ids.vault}/schemas`, { auth: admin().api_key })
    ids.schema = schemas.json().schemas[0].id
    await page.getByText(ids.schema).waitFor()

    await page.goto(`${server.url}/console/vaults/${ids.vault}`)
    await heading('Vault main').waitFor()
    const create = 'Create a document'
    await field(create, 'document')
      .locator('textarea')
      .fill('{"name": "Ada", "age": 36, "home": {"lat": 48.85, "long": 2.35}}')
    await field(create, 'schema_id').locator('input').fill(ids.schema)
    await page.getByRole('button', { name: 'Create document' }).click()
    const region = page.getByRole('region', { name: /^Document / })
    await region.waitFor()
    ids.document = ((await region.getAttribute('aria-label')) ?? '').replace('Document ', '')
    await region
      .getByLabel('Content')
      .fill('{"name": "Ada", "age": 36, "city": "Paris", "home": {"lat": 48.85, "long": 2.35}}')
    await region.getByRole('button', { name: 'Save document' }).click()
    await page.getByText('Document saved.').waitFor()
    const doc = await api().get(`/v2/vaults/${ids.vault}/documents/${ids.document}`, {
      auth: admin().api_key,
    })
    expect(doc.json().documents[0].document).toMatchObject({ name: 'Ada', city: 'Paris' })
    await region.getByLabel(/Owner user id/).fill(carol.id)
    await region.getByRole('button', { name: 'Change owner' }).click()
    await expect
      .poll(async () => {
        const list = await api().get(`/v1/vaults/${ids.vault}/documents`, {
          auth: admin().api_key,
        })
        return list.json().data.items[0]?.owner_id
      })
      .toBe(carol.id)
    await expectAccessible(page, 'vault')
    await screenshot(page, 'vault')
  })

  it('a BLOB uploaded with a progress bar, downloaded byte for byte, deleted after asking', async () => {
    const bytes = randomBytes(3 * 1024 * 1024)
    // The upload is held until its progress bar is on screen: the bar is shown whatever the speed.
    let sawProgress = false
    await page.route(`**/v1/vaults/${ids.vault}/blobs`, async (route) => {
      if (route.request().method() === 'POST') {
        await page.locator('progress[aria-label="Upload progress"]').waitFor()
        sawProgress = true
      }
      await route.continue()
    })
    await page.locator('#blob-file').setInputFiles({
      name: 'report.bin',
      mimeType: 'application/octet-stream',
      buffer: bytes,
    })
    await page.getByRole('button', { name: 'Upload' }).click()
    await page.getByRole('button', { name: 'Download report.bin' }).waitFor()
    expect(sawProgress).toBe(true)
    await page.unroute(`**/v1/vaults/${ids.vault}/blobs`)
    const list = await api().get(`/v1/vaults/${ids.vault}/blobs`, { auth: admin().api_key })
    const blob = list.json().data.items[0]
    expect(blob).toMatchObject({ filename: 'report.bin', size: String(bytes.length) })

    await page.getByLabel('New owner user id (empty: no owner)').fill(carol.id)
    await page.getByRole('button', { name: 'Change BLOB owner' }).click()
    await expect
      .poll(async () => {
        const list = await api().get(`/v1/vaults/${ids.vault}/blobs`, { auth: admin().api_key })
        return list.json().data.items[0]?.owner_id
      })
      .toBe(carol.id)

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download report.bin' }).click(),
    ])
    expect(download.suggestedFilename()).toBe('report.bin')
    expect(readFileSync(await download.path()).equals(bytes)).toBe(true)

    await page.getByRole('button', { name: 'Delete report.bin' }).click()
    await expect
      .poll(() => page.getByRole('button', { name: 'Download report.bin' }).count())
      .toBe(0)
    const gone = await api().get(`/v1/vaults/${ids.vault}/blobs/${blob.id}`, {
      auth: admin().api_key,
    })
    expect(gone.statusCode).toBe(404)
  })

  it('the search builder sends the search_option it shows (eq and geo) and lists the results', async () => {
    await nav('Schemas & search')
    await page.getByRole('heading', { name: 'Search people' }).waitFor()
    await page.getByLabel('Value of filter 1').fill('Ada')
    await page.getByRole('button', { name: 'Add filter' }).click()
    await page.getByLabel('Field of filter 2').selectOption('home')
    await page.getByLabel('Type of filter 2').selectOption('geo_distance')
    await page.getByLabel('Latitude of filter 2').fill('48.86')
    await page.getByLabel('Longitude of filter 2').fill('2.34')
    await page.getByLabel('Distance of filter 2').fill('5')
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    const results = page.getByRole('table', { name: 'Search results' })
    await results.getByText(ids.document).waitFor()
    const shown = JSON.parse((await page.getByTestId('search-option').textContent()) ?? '')
    expect(shown).toMatchObject({
      schema_id: ids.schema,
      filter_type: 'and',
      filter: {
        name: { type: 'eq', value: 'Ada' },
        home: { type: 'geo_distance', value: { lat: 48.86, long: 2.34, distance: 5, unit: 'km' } },
      },
    })
    // The API answers the same option the same way.
    const res = await api().post(`/v1/vaults/${ids.vault}/search`, {
      auth: admin().api_key,
      json: { search_option: shown },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json().data.documents.map((d: { document_id: string }) => d.document_id)).toEqual([
      ids.document,
    ])
    await expectAccessible(page, 'search')
    await screenshot(page, 'search')
  })

  it('a scoped access token is created (shown once), works, and is revoked', async () => {
    await nav('Scoped tokens')
    await heading('Scoped access tokens').waitFor()
    await page.getByLabel('Name').fill('ci-token')
    await page.getByRole('button', { name: 'Create token' }).click()
    const secret = (await page.locator('[data-secret]').textContent()) ?? ''
    const [username, password] = secret.split(':') as [string, string]
    const before = await api().get('/v1/vaults', { basic: { username, password } })
    expect(before.statusCode).toBe(200)
    await page.getByRole('button', { name: 'Revoke ci-token' }).click()
    await expect.poll(() => page.getByRole('button', { name: 'Revoke ci-token' }).count()).toBe(0)
    const after = await api().get('/v1/vaults', { basic: { username, password } })
    expect(after.statusCode).toBe(401)
    await expectAccessible(page, 'tokens')
    await screenshot(page, 'tokens')
  })

  it('the audit log and usage chart are in the navigation for the admin', async () => {
    await nav('Audit log')
    await heading('Audit log').waitFor()
    await page.getByLabel('Operation').fill('vault.create')
    await page.getByRole('button', { name: 'Filter' }).click()
    await expect.poll(() => page.getByRole('cell', { name: 'vault.create' }).count()).toBe(1)
    await page.getByText('1 in all').waitFor()
    await expectAccessible(page, 'audit')
    await screenshot(page, 'audit')
    await nav('Usage')
    await heading('Usage').waitFor()
    await page.getByRole('img', { name: /^Operations per day/ }).waitFor()
    await expectAccessible(page, 'usage')
    await screenshot(page, 'usage')
  })

  it('signing out ends the session on the server too', async () => {
    await nav('Users')
    await heading('Users').waitFor()
    const token = (await sessionToken()) as string
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByText('You are signed out.').waitFor()
    expect(await sessionToken()).toBeNull()
    const res = await server.testApp.app.inject({
      url: '/v1/auth/me',
      headers: { authorization: basicHeader(token) },
    })
    expect(res.statusCode).toBe(400)
  })

  it('signed in with an API key, an admin resets a user API key (shown once)', async () => {
    await page.getByRole('button', { name: 'Sign in with an API key instead' }).click()
    await page.getByRole('textbox', { name: 'API key' }).fill(admin().api_key)
    await page.getByRole('button', { name: 'Sign in with the key' }).click()
    await heading('Users').waitFor()
    expect(await page.locator('.who').textContent()).toContain('(API key)')
    await page.getByRole('link', { name: 'carol' }).click()
    await heading('User carol').waitFor()
    await page.getByRole('button', { name: 'Reset API key' }).click()
    const fresh = (await page.locator('[data-secret]').textContent()) ?? ''
    expect(fresh).not.toBe(carol.apiKey)
    expect((await api().get('/v1/auth/me', { auth: carol.apiKey })).statusCode).toBe(400)
    expect((await api().get('/v1/auth/me', { auth: fresh })).json().user.username).toBe('carol')
    carol.apiKey = fresh
    // Signing out forgets the key here; an API key is not a session the server ends.
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByText('You are signed out.').waitFor()
    expect(await sessionToken()).toBeNull()
    expect((await api().get('/v1/auth/me', { auth: admin().api_key })).statusCode).toBe(200)
  })

  it('a user whose policy lacks a right sees the API refusal, and no audit or usage', async () => {
    await signIn(carol.username, carol.password)
    await heading('Users').waitFor()
    await expect
      .poll(() => page.getByRole('alert').first().textContent())
      .toContain('PERMISSION_DENIED')
    await nav('Vaults')
    await page.getByRole('link', { name: 'main' }).waitFor()
    await page.locator('form[aria-label="Create a vault"] input[name=name]').fill('not-mine')
    await page.getByRole('button', { name: 'Create vault' }).click()
    await expect
      .poll(() => page.locator('form[aria-label="Create a vault"] [role=alert]').textContent())
      .toContain('PERMISSION_DENIED')
    const vaults = await api().get('/v1/vaults', { auth: admin().api_key })
    expect(vaults.json().vaults.map((v: { name: string }) => v.name)).toEqual(['main'])
    const links = page.getByRole('navigation', { name: 'Main' }).getByRole('link')
    expect(await links.allTextContents()).not.toContain('Audit log')
    expect(await links.allTextContents()).not.toContain('Usage')
  })

  it('an expired session sends the user back to sign-in with a message', async () => {
    const token = (await sessionToken()) as string
    const out = await api().post('/v1/auth/logout', { auth: token })
    expect(out.statusCode).toBe(200)
    await nav('Groups')
    await page.getByText('Your session has ended').waitFor()
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor()
  })

  it('signing in with MFA: the console asks for the code when the API says so', async () => {
    const start = await api().post(mfaPath(carol.id, 'start_enrollment'), {
      auth: admin().api_key,
      json: { issuer: 'Coffer console test' },
    })
    expect(start.statusCode, start.body).toBe(200)
    const secret = start.json().mfa.secret as string
    const at = clock.now().getTime()
    const fin = await api().post(mfaPath(carol.id, 'finalize_enrollment'), {
      auth: admin().api_key,
      json: {
        mfa_code_1: appCode(secret, new Date(at)),
        mfa_code_2: appCode(secret, new Date(at + STEP_MS)),
      },
    })
    expect(fin.statusCode, fin.body).toBe(200)
    clock.advance(2 * STEP_MS)
    await signIn(carol.username, carol.password)
    const code = page.getByLabel('MFA code')
    await code.waitFor()
    await expect
      .poll(() => page.locator('.field:has([name=mfa_code]) .field-error').textContent())
      .toContain('authenticator')
    await code.fill(appCode(secret, clock.now()))
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    await heading('Users').waitFor()
    expect(await page.locator('.who').textContent()).toContain('carol')
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByText('You are signed out.').waitFor()
  })

  it('nothing the console did was refused by its own CSP', () => {
    expect(problems).toEqual([])
  })
})
