import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  cofferEnv,
  REPO_ROOT,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from './helpers/processes.js'
import { scriptName, tourBlocks, tourScript } from './helpers/readme-tour.js'
import { testDialect } from './helpers/store.js'

const execFileAsync = promisify(execFile)
const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')

/**
 * Issue 17: the README's tour runs verbatim. A fresh `coffer serve` in an empty working
 * directory (its defaults: `./data`, on SQLite a generated master key; on PostgreSQL a fresh
 * schema), then every tour block in one `bash -euo pipefail` session in that directory, as a
 * newcomer pastes them into a second terminal. The blocks check their own answers.
 */
describe(`the README tour on ${testDialect}`, () => {
  let dir: string
  let db: SharedDatabase | undefined
  let server: ServerProcess

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'coffer-tour-'))
    let env: Record<string, string> = {}
    if (testDialect === 'postgres') {
      db = await sharedDatabase()
      const { COFFER_DATA_DIR: _ignored, ...pg } = db.env(dir)
      env = pg
    }
    server = await startServerProcess(env, { cwd: dir })
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('finds the tour: shell blocks and the SDK script, in order', () => {
    const blocks = tourBlocks(README)
    expect(blocks.length).toBeGreaterThanOrEqual(8)
    expect(blocks[0]?.lang).toBe('sh')
    expect(blocks.filter((b) => b.lang === 'js').map(scriptName)).toEqual(['sdk-tour.cjs'])
  })

  it('runs every block against a fresh server and each check passes', async () => {
    const blocks = tourBlocks(README)
    for (const b of blocks) if (b.lang === 'js') writeFileSync(join(dir, scriptName(b)), b.code)
    const script = tourScript(blocks)
    let stdout: string
    try {
      ;({ stdout } = await execFileAsync('bash', ['-euo', 'pipefail', '-c', script], {
        cwd: dir,
        timeout: 90_000,
        env: cofferEnv({
          COFFER_URL: server.url,
          // What `npm install truevault` gives an app (the checkout has it as a dev dependency).
          NODE_PATH: join(REPO_ROOT, 'node_modules'),
        }),
      }))
    } catch (e) {
      const failed = e as { code?: unknown; stdout?: string; stderr?: string }
      throw new Error(
        `the tour failed (exit ${String(failed.code)})\n--- stdout\n${failed.stdout}\n--- stderr\n${failed.stderr}\n--- server\n${server.output().slice(-4000)}`,
      )
    }
    // The SDK script ran to its end, and nothing the tour did made the server log an error.
    expect(stdout).toContain('SDK tour done')
    expect(server.output()).toContain('"route":"/v1/vaults/:vault_id/search"')
    expect(server.output()).not.toMatch(/"level":50/)
  }, 120_000)
})
