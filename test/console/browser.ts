import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { type Browser, chromium, type Page } from 'playwright-core'
import { expect } from 'vitest'

/** Debian's Chromium (`.ci/run` installs it); no browser is ever downloaded. */
export const CHROMIUM = '/usr/bin/chromium'
export const HAS_CHROMIUM = existsSync(CHROMIUM)
if (!HAS_CHROMIUM)
  console.warn(`console e2e tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`)

const REPO = new URL('../../', import.meta.url).pathname
export const SCREENSHOTS = join(REPO, 'test-output/console')

export function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: { target: unknown }[]
}

/**
 * axe-core run in the page (@axe-core/playwright needs a newer Node); the
 * page must have no serious or critical violation.
 */
export async function expectAccessible(page: Page, name: string): Promise<void> {
  // Evaluated through the DevTools protocol: the page's CSP (rightly) refuses an inline script tag.
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(AXE)
  const violations = (await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as { axe: { run: (o: object) => Promise<{ violations: unknown[] }> } }
    ).axe
    const result = await axe.run({ resultTypes: ['violations'] })
    return result.violations
  })) as AxeViolation[]
  const serious = violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map(
      (v) => `${v.id} (${v.impact}): ${v.help} at ${JSON.stringify(v.nodes.map((n) => n.target))}`,
    )
  expect(serious, `axe on ${name}`).toEqual([])
}

/** A full-page screenshot under test-output/console/ (gitignored). */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true })
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true })
}

/** Collects what the page's console says about refused content (CSP) and script errors. */
export function watchPage(page: Page): string[] {
  const problems: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text()))
      problems.push(m.text())
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  return problems
}
