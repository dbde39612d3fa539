import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const MAIN = ['--import', 'tsx', 'src/main.ts']
const dirs: string[] = []

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-cli-'))
  dirs.push(dir)
  return dir
}

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env }
  for (const k of Object.keys(base)) if (k.startsWith('COFFER_')) delete base[k]
  return { ...base, COFFER_LOG_LEVEL: 'info', ...extra }
}

/** Starts `coffer serve` and resolves with its port once it listens. */
function serve(dir: string): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  const child = spawn(process.execPath, [...MAIN, 'serve'], {
    env: env({ COFFER_DATA_DIR: dir, COFFER_PORT: '0', COFFER_CONSENT_PORT: '0' }),
  })
  let out = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 20_000)
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      const m = /listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve({ child, port: Number(m[1]), output: () => out })
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
  })
}

async function stop(child: ChildProcess): Promise<void> {
  const done = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  await done
}

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe('coffer command', () => {
  it('account create prints the new account and admin as JSON', async () => {
    const dir = dataDir()
    const { stdout } = await run(process.execPath, [...MAIN, 'account', 'create'], {
      env: env({ COFFER_DATA_DIR: dir }),
    })
    const created = JSON.parse(stdout)
    expect(Object.keys(created).sort()).toEqual(['account_id', 'api_key', 'password', 'username'])
    expect(created.account_id).toMatch(/^[0-9a-f-]{36}$/)
    expect(created.username).toBe('admin')
    const again = JSON.parse(
      (
        await run(process.execPath, [...MAIN, 'account', 'create'], {
          env: env({ COFFER_DATA_DIR: dir }),
        })
      ).stdout,
    )
    expect(again.account_id).not.toBe(created.account_id)
  })

  it('serve bootstraps an empty database once, writing credentials to a 0600 file', async () => {
    const dir = dataDir()
    const first = await serve(dir)
    const file = join(dir, 'bootstrap-credentials.json')
    const creds = JSON.parse(readFileSync(file, 'utf8'))
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(statSync(join(dir, 'coffer.db')).mode & 0o077).toBe(0)
    const me = await fetch(`http://127.0.0.1:${first.port}/v1/auth/me`, {
      headers: { authorization: `Basic ${Buffer.from(`${creds.api_key}:`).toString('base64')}` },
    })
    expect(((await me.json()) as { user: { account_id: string } }).user.account_id).toBe(
      creds.account_id,
    )
    const login = await fetch(`http://127.0.0.1:${first.port}/v1/auth/login`, {
      method: 'POST',
      body: new URLSearchParams({
        account_id: creds.account_id,
        username: creds.username,
        password: creds.password,
      }),
    })
    expect(login.status).toBe(200)
    await stop(first.child)
    const log = first.output()
    expect(log).toContain(creds.account_id)
    expect(log).toContain(file)
    expect(log).not.toContain(creds.password)
    expect(log).not.toContain(creds.api_key)

    const second = await serve(dir)
    await stop(second.child)
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(creds)
    expect(second.output()).not.toContain('created the first account')
  }, 60_000)

  it('lists every configuration problem and exits non-zero', async () => {
    const failed = await run(process.execPath, [...MAIN, 'migrate'], {
      env: env({ COFFER_PORT: 'eighty', COFFER_LOG_LEVEL: 'loud', COFFER_DATA_DIR: dataDir() }),
    }).catch((e: { code: number; stderr: string }) => e)
    expect('code' in failed && failed.code).toBe(1)
    expect((failed as { stderr: string }).stderr).toMatch(/COFFER_PORT must be a port number/)
    expect((failed as { stderr: string }).stderr).toMatch(/COFFER_LOG_LEVEL must be one of/)
  })

  it('rejects an unknown command with the usage text', async () => {
    const failed = await run(process.execPath, [...MAIN, 'explode'], {
      env: env({ COFFER_DATA_DIR: dataDir() }),
    }).catch((e: { code: number; stderr: string }) => e)
    expect((failed as { code: number }).code).toBe(1)
    expect((failed as { stderr: string }).stderr).toMatch(/usage: coffer/)
  })
})
