import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  bootstrapCredentials,
  cofferFails,
  runCoffer,
  startServerProcess,
} from './helpers/processes.js'

const dirs: string[] = []

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-cli-'))
  dirs.push(dir)
  return dir
}

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/**
 * The `coffer` command with its defaults: no COFFER_DATABASE_URL, so the database is the SQLite
 * file in the data folder whatever TEST_DATABASE says.
 */
describe('coffer command', () => {
  it('account create prints the new account and admin as JSON', async () => {
    const dir = dataDir()
    const { stdout } = await runCoffer(['account', 'create'], { COFFER_DATA_DIR: dir })
    const created = JSON.parse(stdout)
    expect(Object.keys(created).sort()).toEqual(['account_id', 'api_key', 'password', 'username'])
    expect(created.account_id).toMatch(/^[0-9a-f-]{36}$/)
    expect(created.username).toBe('admin')
    // TrueVault's credential length (decisions: credential shape).
    expect(created.api_key).toMatch(/^[A-Za-z0-9_-]{36}$/)
    const again = JSON.parse(
      (await runCoffer(['account', 'create'], { COFFER_DATA_DIR: dir })).stdout,
    )
    expect(again.account_id).not.toBe(created.account_id)
  }, 60_000)

  it('serve bootstraps an empty database once, writing credentials to a 0600 file', async () => {
    const dir = dataDir()
    const first = await startServerProcess({ COFFER_DATA_DIR: dir })
    const file = join(dir, 'bootstrap-credentials.json')
    const creds = bootstrapCredentials(dir)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(statSync(join(dir, 'coffer.db')).mode & 0o077).toBe(0)
    // Built as a TrueVault-era Node client builds it: base64 of the key, then "Og==" (":").
    expect(creds.api_key).toHaveLength(36)
    const me = await fetch(`${first.url}/v1/auth/me`, {
      headers: { authorization: `Basic ${Buffer.from(creds.api_key).toString('base64')}Og==` },
    })
    expect(((await me.json()) as { user: { account_id: string } }).user.account_id).toBe(
      creds.account_id,
    )
    const login = await fetch(`${first.url}/v1/auth/login`, {
      method: 'POST',
      body: new URLSearchParams({
        account_id: creds.account_id,
        username: creds.username,
        password: creds.password,
      }),
    })
    expect(login.status).toBe(200)
    await first.stop()
    const log = first.output()
    expect(log).toContain(creds.account_id)
    expect(log).toContain(file)
    expect(log).not.toContain(creds.password)
    expect(log).not.toContain(creds.api_key)

    const second = await startServerProcess({ COFFER_DATA_DIR: dir })
    await second.stop()
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(creds)
    expect(second.output()).not.toContain('created the first account')
  }, 60_000)

  it('lists every configuration problem and exits non-zero', async () => {
    const failed = await cofferFails(['migrate'], {
      COFFER_PORT: 'eighty',
      COFFER_LOG_LEVEL: 'loud',
      COFFER_DATA_DIR: dataDir(),
    })
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/COFFER_PORT must be a port number/)
    expect(failed.stderr).toMatch(/COFFER_LOG_LEVEL must be one of/)
  })

  it('rejects an unknown command with the usage text', async () => {
    const failed = await cofferFails(['explode'], { COFFER_DATA_DIR: dataDir() })
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/usage: coffer/)
  })
})
