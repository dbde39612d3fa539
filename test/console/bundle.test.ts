import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
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

  it('is a production build even when NODE_ENV says otherwise (as under Vitest)', () => {
    // A development build names every element's source file, by its absolute path on the
    // building machine, and is half as large again: never what npm ci should ship.
    const out = mkdtempSync(join(tmpdir(), 'coffer-console-dev-'))
    const repo = new URL('../../', import.meta.url).pathname
    try {
      execFileSync(
        process.execPath,
        [
          join(repo, 'node_modules/vite/bin/vite.js'),
          'build',
          '--config',
          'console/vite.config.ts',
          '--outDir',
          out,
          '--emptyOutDir',
        ],
        { cwd: repo, stdio: 'pipe', env: { ...process.env, NODE_ENV: 'development' } },
      )
      const js = readdirSync(join(out, 'assets'))
        .filter((f) => f.endsWith('.js'))
        .map((f) => readFileSync(join(out, 'assets', f), 'utf8'))
        .join('\n')
      expect(js.length).toBeGreaterThan(1000)
      expect(js).not.toContain(join(repo, 'console'))
      expect(js).not.toMatch(/lineNumber:|jsxDEV/)
    } finally {
      rmSync(out, { recursive: true, force: true })
    }
  }, 60_000)

  it('the build under test is a production one (no source paths)', () => {
    const js = readdirSync(join(dir, 'assets'))
      .filter((f) => f.endsWith('.js'))
      .map((f) => readFileSync(join(dir, 'assets', f), 'utf8'))
      .join('\n')
    expect(js).not.toContain(new URL('../../console/', import.meta.url).pathname)
    expect(js).not.toMatch(/lineNumber:|jsxDEV/)
  })

  it('every asset name carries its content hash', () => {
    for (const f of readdirSync(join(dir, 'assets')))
      expect(f).toMatch(/^[\w-]+-[\w-]{8}\.(js|css|svg|png|woff2)$/)
  })
})
