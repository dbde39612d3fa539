import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

const REPO = new URL('../../', import.meta.url).pathname
export const CONSOLE_DIST = join(REPO, 'dist/console')
const LOCK = join(REPO, 'dist/.console-build-lock')

/**
 * The console's build as `npm ci` makes it (the `prepare` script); built here only when missing
 * (a fresh worktree), one test file at a time: the others wait for the lock.
 */
export async function ensureConsoleBuilt(): Promise<string> {
  if (existsSync(join(CONSOLE_DIST, 'index.html'))) return CONSOLE_DIST
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
    if (!existsSync(join(CONSOLE_DIST, 'index.html'))) {
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
