import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { beforeAll, describe, expect, it } from 'vitest'
import { ensureConsoleBuilt } from './build.js'

/** Issue 15's budget: the console's JavaScript, gzipped, at most 150 KB. */
const JS_BUDGET_GZIP_BYTES = 150 * 1024

let dir: string
beforeAll(async () => {
  dir = await ensureConsoleBuilt()
}, 120_000)

describe('the console build', () => {
  it(`keeps its JavaScript within ${JS_BUDGET_GZIP_BYTES} bytes gzipped`, () => {
    const scripts = readdirSync(join(dir, 'assets')).filter((f) => f.endsWith('.js'))
    expect(scripts.length).toBeGreaterThan(0)
    const gzipped = scripts.reduce(
      (sum, f) => sum + gzipSync(readFileSync(join(dir, 'assets', f)), { level: 9 }).length,
      0,
    )
    expect(gzipped).toBeGreaterThan(1000)
    expect(gzipped).toBeLessThanOrEqual(JS_BUDGET_GZIP_BYTES)
  })

  it('index.html has no inline script or style, and loads only hashed assets of /console', () => {
    const html = readFileSync(join(dir, 'index.html'), 'utf8')
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)]
    expect(scripts.length).toBeGreaterThan(0)
    for (const [, attributes, body] of scripts) {
      expect(body?.trim()).toBe('')
      expect(attributes).toMatch(/src="\/console\/assets\/[\w-]+-[\w-]{8}\.js"/)
    }
    expect(html).not.toMatch(/<style\b/)
    expect(html).not.toMatch(/\sstyle=/)
    expect(html).not.toMatch(/\son[a-z]+=/)
    const links = [...html.matchAll(/<link\b[^>]*href="([^"]+)"/g)].map((m) => m[1])
    for (const href of links) expect(href).toMatch(/^\/console\/assets\/[\w-]+-[\w-]{8}\.css$/)
    expect(html).not.toMatch(/https?:\/\//)
  })

  it('every asset name carries its content hash', () => {
    for (const f of readdirSync(join(dir, 'assets')))
      expect(f).toMatch(/^[\w-]+-[\w-]{8}\.(js|css|svg|png|woff2)$/)
  })
})
