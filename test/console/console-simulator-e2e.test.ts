import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConsoleAssets } from '../../src/modules/console/console.assets.js'
import { createUser } from '../helpers/app.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectAccessible, HAS_CHROMIUM, launch, screenshot, watchPage } from './browser.js'
import { ensureConsoleBuilt } from './build.js'

/**
 * Issue 15: the policy simulator page in Chromium, its answer checked against the API's real
 * decision for the same user and resource. It needs the simulator's endpoints
 * (`POST /v1/policy/explain`, `GET /v1/policy/access`, from the "explain" branch).
 */
let server: TestServer
let browser: Browser
let page: Page
let problems: string[]

beforeAll(async () => {
  if (!HAS_CHROMIUM) return
  const dist = await ensureConsoleBuilt()
  server = await startTestServer({ consoleAssets: loadConsoleAssets(dist) })
  browser = await launch()
  page = await browser.newPage()
  page.setDefaultTimeout(10_000)
  problems = watchPage(page)
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.close()
})

describe.skipIf(!HAS_CHROMIUM)('the policy simulator page', () => {
  it("explains a user's access to a document and lists who can read it, as the API decides", async () => {
    const t = server.testApp
    const auth = t.admin.api_key
    const probe = await t.api.post('/v1/policy/explain', { auth, json: {} })
    expect(probe.statusCode, 'POST /v1/policy/explain is missing (the explain branch)').not.toBe(
      404,
    )
    const vault = (await t.api.post('/v1/vaults', { auth, form: { name: 'sim' } })).json().vault.id
    const doc = await t.api.post(`/v2/vaults/${vault}/documents`, {
      auth,
      json: { document: { a: 1 } },
    })
    const documentId = doc.json().document_id as string
    const reader = await createUser(t, {
      username: 'dora',
      policy: [{ Resources: [`Vault::${vault}::Document::.*`], Activities: 'R' }],
    })
    const resource = `Vault::${vault}::Document::${documentId}`

    // The API's real decisions for this user: read allowed, update refused.
    const read = await t.api.get(`/v2/vaults/${vault}/documents/${documentId}`, {
      auth: reader.apiKey,
    })
    expect(read.statusCode).toBe(200)
    const update = await t.api.put(`/v2/vaults/${vault}/documents/${documentId}`, {
      auth: reader.apiKey,
      json: { document: { a: 2 } },
    })
    expect(update.statusCode).toBeGreaterThanOrEqual(400)

    await page.goto(`${server.url}/console/`)
    await page.getByLabel('Account id').fill(t.admin.account_id)
    await page.getByLabel('Username').fill(t.admin.username)
    await page.getByLabel('Password').fill(t.admin.password)
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: 'Users' }).waitFor()
    await page.getByRole('link', { name: 'Policy simulator' }).click()
    await page.getByRole('heading', { level: 1, name: 'Policy simulator' }).waitFor()

    const explain = page.locator('form[aria-label="Explain a decision"]')
    await explain.getByLabel('User', { exact: true }).selectOption(reader.id)
    await explain.getByLabel('Resource', { exact: true }).fill(resource)
    await explain.getByRole('button', { name: 'Explain' }).click()
    const decision = (activity: string) =>
      page.locator(`table[aria-label="Decision per activity"] tr[data-activity="${activity}"] td`)
    await decision('R').first().waitFor()
    expect(await decision('R').first().textContent()).toBe('allowed')
    expect(await decision('U').first().textContent()).toBe('denied')
    expect(await decision('R').nth(1).textContent()).toContain(`g-dora`)
    expect(await decision('R').nth(1).textContent()).toContain(`Vault::${vault}::Document::.*`)

    // A pasted policy is explained too, before any group holds it.
    await explain.getByLabel('a policy pasted here').check()
    await explain
      .getByLabel('Policy to try')
      .fill(JSON.stringify([{ Resources: [`Vault::${vault}::Document::.*`], Activities: 'U' }]))
    await explain.getByRole('button', { name: 'Explain' }).click()
    await expect.poll(() => decision('U').first().textContent()).toBe('allowed')
    expect(await decision('R').first().textContent()).toBe('denied')

    const who = page.locator('form[aria-label="Who has access"]')
    await who.getByLabel(/^Resource/).fill(resource)
    await who.getByRole('button', { name: 'Find users' }).click()
    const row = page.locator('table[aria-label="Users with access"] tr', { hasText: 'dora' })
    await row.waitFor()
    expect(await row.locator('td').nth(2).textContent()).toBe('R')
    const access = await t.api.get('/v1/policy/access', { auth, query: { resource } })
    expect(access.statusCode, access.body).toBe(200)
    const dora = access.json().data.items.find((i: { username: string }) => i.username === 'dora')
    expect(dora.activities).toBe('R')

    await expectAccessible(page, 'simulator')
    await screenshot(page, 'simulator')
    expect(problems).toEqual([])
  })
})
