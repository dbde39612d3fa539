import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { consoleBuildIsStale } from './build.js'

/**
 * The console's tests run against dist/console: a build older than the console's sources would
 * let them pass on code that is no longer there (an edited page, a broken label), so it is
 * rebuilt first.
 */
const root = mkdtempSync(join(tmpdir(), 'coffer-console-build-'))
const sources = join(root, 'console')
const index = join(root, 'dist/index.html')
mkdirSync(join(sources, 'src/pages'), { recursive: true })
mkdirSync(join(root, 'dist'))
const page = join(sources, 'src/pages/users.tsx')
writeFileSync(page, 'export {}')
writeFileSync(join(sources, 'index.html'), '<!doctype html>')
afterAll(() => rmSync(root, { recursive: true, force: true }))

const at = (path: string, seconds: number) => utimesSync(path, seconds, seconds)

describe('consoleBuildIsStale', () => {
  it('is stale without a build', () => {
    expect(consoleBuildIsStale([sources], index)).toBe(true)
  })

  it('is fresh when the build is newer than every source', () => {
    writeFileSync(index, '<!doctype html>')
    at(page, 1_000)
    at(join(sources, 'index.html'), 1_000)
    for (const dir of [join(sources, 'src/pages'), join(sources, 'src'), sources]) at(dir, 1_000)
    at(index, 2_000)
    expect(consoleBuildIsStale([sources], index)).toBe(false)
  })

  it('is stale when a source, however deep, was changed after the build', () => {
    at(page, 3_000)
    expect(consoleBuildIsStale([sources], index)).toBe(true)
  })

  it('is stale when a source was removed after the build', () => {
    at(page, 1_000)
    const old = join(sources, 'src/pages/old.tsx')
    writeFileSync(old, 'export {}')
    at(old, 1_000)
    rmSync(old)
    at(join(sources, 'src/pages'), 3_000)
    expect(consoleBuildIsStale([sources], index)).toBe(true)
    at(join(sources, 'src/pages'), 1_000)
  })

  it('a single file counts as a source too', () => {
    at(page, 1_000)
    const lock = join(root, 'package-lock.json')
    writeFileSync(lock, '{}')
    at(lock, 3_000)
    expect(consoleBuildIsStale([sources], index)).toBe(false)
    expect(consoleBuildIsStale([sources, lock], index)).toBe(true)
  })
})
