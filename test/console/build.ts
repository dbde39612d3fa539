import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

const REPO = new URL('../../', import.meta.url).pathname
export const CONSOLE_DIST = join(REPO, 'dist/console')
const LOCK = join(REPO, 'dist/.console-build-lock')
/** What the build is made of: the console's sources and config, and the locked dependencies. */
const SOURCES = [join(REPO, 'console'), join(REPO, 'package-lock.json')]

/** A folder's own time changes when a file is added or removed in it (a deleted page). */
function newestChange(path: string): number {
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(path).reduce(
    (newest, name) => Math.max(newest, newestChange(join(path, name))),
    stat.mtimeMs,
  )
}

/**
 * A build is stale when it is missing or any source changed after it was written: the tests
 * would otherwise pass or fail on code that is no longer there.
 */
export function consoleBuildIsStale(sources: readonly string[], index: string): boolean {
  if (!existsSync(index)) return true
  const built = statSync(index).mtimeMs
  return sources.some((source) => existsSync(source) && newestChange(source) > built)
}

/**
 * The console's build as `npm ci` makes it (the `prepare` script); rebuilt here only when
 * missing (a fresh worktree) or older than its sources, one test file at a time: the others
 * wait for the lock, then find it fresh.
 */
export async function ensureConsoleBuilt(): Promise<string> {
  const index = join(CONSOLE_DIST, 'index.html')
  if (!consoleBuildIsStale(SOURCES, index)) return CONSOLE_DIST
  mkdirSync(join(REPO, 'dist'), { recursive: true })
  for (;;) {
    try {
      mkdirSync(LOCK)
      break
    } catch {
      await sleep(250)
    }
  }
  try {
    if (consoleBuildIsStale(SOURCES, index)) {
      execFileSync(
        process.execPath,
        [
          join(REPO, 'node_modules/vite/bin/vite.js'),
          'build',
          '--config',
          'console/vite.config.ts',
        ],
        { cwd: REPO, stdio: 'pipe' },
      )
    }
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
  return CONSOLE_DIST
}
