import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clusterBlobEnv } from './helpers/processes.js'
import { TEST_PG_URL, testDialect } from './helpers/store.js'

const run = promisify(execFile)
const MAIN = ['--import', 'tsx', 'src/main.ts']
const CONSENT = '/api/v1/cmp/consent'
const SHOP = 'cli-shop.example'
const EMAIL = 'cli.person@example.com'
const dirs: string[] = []
const schemas: string[] = []

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-consent-cli-'))
  dirs.push(dir)
  return dir
}

/**
 * The environment of one deployment: a data folder, and on PostgreSQL a fresh schema (through
 * the URL's `options`) with the master key and consent secret a PostgreSQL node must be given.
 */
async function deployment(): Promise<Record<string, string>> {
  const dir = dataDir()
  if (testDialect === 'sqlite') return { COFFER_DATA_DIR: dir }
  const schema = `coffer_cli_${randomBytes(6).toString('hex')}`
  const client = new pg.Client({ connectionString: TEST_PG_URL })
  await client.connect()
  await client.query(`create schema ${schema}`)
  await client.end()
  schemas.push(schema)
  const url = new URL(TEST_PG_URL)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return {
    COFFER_DATA_DIR: dir,
    COFFER_DATABASE_URL: url.toString(),
    COFFER_MASTER_KEY: randomBytes(32).toString('base64'),
    COFFER_CONSENT_JWT_SECRET: randomBytes(32).toString('base64url'),
    ...clusterBlobEnv(join(dir, 'blobs')),
  }
}

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env }
  for (const k of Object.keys(base)) if (k.startsWith('COFFER_')) delete base[k]
  return {
    ...base,
    COFFER_LOG_LEVEL: 'info',
    COFFER_PORT: '0',
    COFFER_CONSENT_PORT: '0',
    COFFER_ENV_FILE: 'none',
    ...extra,
  }
}

interface Served {
  child: ChildProcess
  api?: number
  consent?: number
  output: () => string
}

const API_LINE = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/
const CONSENT_LINE = /Consent API listening at http:\/\/127\.0\.0\.1:(\d+)/

/** Starts `coffer serve …`; resolves once the listeners it should open are listening. */
function serve(
  extra: Record<string, string>,
  args: string[],
  want: { api: boolean; consent: boolean },
): Promise<Served> {
  const child = spawn(process.execPath, [...MAIN, 'serve', ...args], { env: env(extra) })
  let out = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 30_000)
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      const api = API_LINE.exec(out)?.[1]
      const consent = CONSENT_LINE.exec(out)?.[1]
      if ((!want.api || api) && (!want.consent || consent)) {
        clearTimeout(timer)
        resolve({
          child,
          ...(api ? { api: Number(api) } : {}),
          ...(consent ? { consent: Number(consent) } : {}),
          output: () => out,
        })
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited (${code}): ${out}`))
    })
  })
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const done = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  await done
}

function exportCmd(extra: Record<string, string>, args: string[]) {
  return run(process.execPath, [...MAIN, 'consent', 'export', ...args], { env: env(extra) })
}

async function fails(promise: Promise<unknown>): Promise<{ code: number; stderr: string }> {
  const error = await promise.then(
    () => {
      throw new Error('expected the command to fail')
    },
    (e: { code: number; stderr: string }) => e,
  )
  return error
}

const consentUrl = (port: number, email = EMAIL) =>
  `http://127.0.0.1:${port}${CONSENT}?${new URLSearchParams({ provider: 'email', shop: SHOP, privacy_center_id: 'pc', customer_email: email })}`

afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
  if (schemas.length === 0) return
  const client = new pg.Client({ connectionString: TEST_PG_URL })
  await client.connect()
  for (const s of schemas) await client.query(`drop schema if exists ${s} cascade`)
  await client.end()
})

describe('coffer serve: two listeners', () => {
  let deploy: Record<string, string>
  let jwt: string
  let firstLog: string

  beforeAll(async () => {
    deploy = await deployment()
  })

  it('serves the consent API and the main API on their own ports, each only its own', async () => {
    const s = await serve(deploy, [], { api: true, consent: true })
    try {
      expect(s.api).not.toBe(s.consent)
      const created = await fetch(consentUrl(s.consent as number), {
        headers: { 'sec-gpc': '1', 'user-agent': 'cli-test' },
      })
      expect(created.status).toBe(200)
      expect(created.headers.get('cache-control')).toBe('no-store')
      const record = (await created.json()) as { jwt: string; isExisting: boolean }
      expect(record.isExisting).toBe(false)
      jwt = record.jwt
      const posted = await fetch(`http://127.0.0.1:${s.consent}${CONSENT}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jwt, consentAnalytics: true }),
      })
      expect(posted.status).toBe(200)
      expect(((await posted.json()) as { consentAnalytics: boolean }).consentAnalytics).toBe(true)

      const onMain = await fetch(consentUrl(s.api as number))
      expect(onMain.status).toBe(404)
      expect(((await onMain.json()) as { result: string }).result).toBe('error')
      const mainOnConsent = await fetch(`http://127.0.0.1:${s.consent}/v1/auth/me`)
      expect(mainOnConsent.status).toBe(404)
      expect(await mainOnConsent.json()).toEqual({ error: 'Not found' })
    } finally {
      await stop(s.child)
    }
    firstLog = s.output()
    expect(firstLog).toContain('consent request')
    // The email travels in the query string: it never reaches the log.
    expect(firstLog).not.toContain(EMAIL)
    expect(firstLog).not.toContain('customer_email')
    expect(firstLog).not.toContain(jwt)
  }, 60_000)

  it.runIf(testDialect === 'sqlite')('generates the consent secret once, into a 0600 file', () => {
    const file = join(deploy.COFFER_DATA_DIR as string, 'consent-jwt.key')
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(readFileSync(file, 'utf8').trim().length).toBeGreaterThanOrEqual(43)
    expect(firstLog).toContain('generated a new consent secret')
    expect(firstLog).not.toContain(readFileSync(file, 'utf8').trim())
  })

  it('keeps the consent secret across restarts: an old token still works', async () => {
    const s = await serve(deploy, [], { api: true, consent: true })
    try {
      const res = await fetch(`http://127.0.0.1:${s.consent}${CONSENT}`, {
        method: 'POST',
        body: JSON.stringify({ jwt, optedOut: true }),
      })
      expect(res.status).toBe(200)
    } finally {
      await stop(s.child)
    }
    expect(s.output()).not.toContain('generated a new consent secret')
  }, 60_000)

  it('exports the shop’s history as CSV to standard output', async () => {
    const { stdout, stderr } = await exportCmd(deploy, ['--shop', SHOP])
    const rows = stdout.split('\r\n').filter((r) => r !== '')
    expect(rows[0]).toMatch(/^at,shop,consumer_ref,consumer_kind,action,/)
    expect(rows.slice(1).map((r) => r.split(',')[4])).toEqual(['created', 'updated', 'updated'])
    expect(rows[1]).toContain(',true,cli-test')
    expect(stdout).not.toContain(EMAIL)
    expect(stderr).toContain(`exported 3 consent history entries for ${SHOP}`)
  }, 30_000)

  it('exports JSON lines to a new 0600 file, with identifiers when asked, never overwriting', async () => {
    const file = join(deploy.COFFER_DATA_DIR as string, 'export.jsonl')
    await exportCmd(deploy, [
      `--shop=${SHOP}`,
      '--format',
      'jsonl',
      '--output',
      file,
      '--identifiers',
    ])
    expect(statSync(file).mode & 0o777).toBe(0o600)
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(lines.map((l) => [l.action, l.consumer])).toEqual([
      ['created', EMAIL],
      ['updated', EMAIL],
      ['updated', EMAIL],
    ])
    expect(lines[2].changes).toEqual({ optedOut: { from: null, to: true } })
    const again = await fails(exportCmd(deploy, ['--shop', SHOP, '--output', file]))
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/EEXIST|already exists/)
    const filtered = await exportCmd(deploy, [
      '--shop',
      SHOP,
      '--format',
      'jsonl',
      '--consumer',
      'nobody@example.com',
    ])
    expect(filtered.stdout).toBe('')
  }, 30_000)

  it('refuses bad export arguments with a message and exit code 1', async () => {
    // Every argument rule is unit-tested (src/modules/consent/consent-cli.test.ts).
    const failed = await fails(exportCmd(deploy, ['--format', 'jsonl']))
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/--shop <domain> is required/)
  }, 30_000)
})

describe('coffer serve: one listener', () => {
  it('runs only the consent API with --only consent (no account bootstrapped)', async () => {
    const deploy = await deployment()
    const s = await serve(deploy, ['--only', 'consent'], { api: false, consent: true })
    try {
      expect((await fetch(consentUrl(s.consent as number))).status).toBe(200)
    } finally {
      await stop(s.child)
    }
    expect(s.output()).not.toMatch(API_LINE)
    expect(existsSync(join(deploy.COFFER_DATA_DIR as string, 'bootstrap-credentials.json'))).toBe(
      false,
    )
  }, 60_000)

  it('runs only the main API with COFFER_SERVE=api (no consent secret needed)', async () => {
    const deploy = await deployment()
    delete deploy.COFFER_CONSENT_JWT_SECRET
    const s = await serve({ ...deploy, COFFER_SERVE: 'api' }, [], { api: true, consent: false })
    await stop(s.child)
    expect(s.output()).not.toMatch(CONSENT_LINE)
    expect(existsSync(join(deploy.COFFER_DATA_DIR as string, 'consent-jwt.key'))).toBe(false)
  }, 60_000)

  it('refuses an unknown mode', async () => {
    const deploy = await deployment()
    const failed = await fails(
      run(process.execPath, [...MAIN, 'serve', '--only', 'admin'], { env: env(deploy) }),
    )
    expect(failed.stderr).toMatch(/--only api\|consent\|both/)
    const bad = await fails(
      run(process.execPath, [...MAIN, 'migrate'], { env: env({ ...deploy, COFFER_SERVE: 'all' }) }),
    )
    expect(bad.stderr).toMatch(/COFFER_SERVE must be both, api or consent/)
  }, 60_000)

  it.runIf(testDialect === 'postgres')(
    'needs a configured consent secret on PostgreSQL',
    async () => {
      const deploy = await deployment()
      delete deploy.COFFER_CONSENT_JWT_SECRET
      const failed = await fails(run(process.execPath, [...MAIN, 'serve'], { env: env(deploy) }))
      expect(failed.stderr).toMatch(/COFFER_CONSENT_JWT_SECRET.*PostgreSQL/)
    },
    60_000,
  )

  it.runIf(testDialect === 'sqlite')(
    'will not replace a lost secret once records exist',
    async () => {
      const deploy = await deployment()
      const s = await serve(deploy, ['--only', 'consent'], { api: false, consent: true })
      try {
        expect((await fetch(consentUrl(s.consent as number))).status).toBe(200)
      } finally {
        await stop(s.child)
      }
      unlinkSync(join(deploy.COFFER_DATA_DIR as string, 'consent-jwt.key'))
      const failed = await fails(run(process.execPath, [...MAIN, 'serve'], { env: env(deploy) }))
      expect(failed.stderr).toMatch(/holds consent records made with a secret that is gone/)
    },
    60_000,
  )
})
