import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { MasterKey } from '../../src/crypto/master-key.js'
import { TEST_PG_URL, testDialect } from './store.js'

const MAIN = ['--import', 'tsx', 'src/main.ts']

export interface ServerProcess {
  url: string
  child: ChildProcess
  stop(): Promise<void>
}

/** The environment of a spawned `coffer`: only the given COFFER_ settings, none inherited. */
export function cofferEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env }
  for (const k of Object.keys(base)) if (k.startsWith('COFFER_')) delete base[k]
  return { ...base, COFFER_LOG_LEVEL: 'info', ...extra }
}

/** Starts `coffer serve` as its own process; resolves once it listens. */
export function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...MAIN, 'serve'], {
    // The main API only: these tests are about it, and a consent listener would need its own
    // port and, on PostgreSQL, a shared secret.
    env: cofferEnv({ COFFER_PORT: '0', COFFER_SERVE: 'api', ...env }),
  })
  let out = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`server did not start: ${out}`))
    }, 30_000)
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      const m = /listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        child.stdout?.off('data', onData)
        child.stderr?.off('data', onData)
        resolve({
          url: m[1] as string,
          child,
          stop: async () => {
            if (child.exitCode !== null) return
            const done = new Promise((r) => child.once('exit', r))
            child.kill('SIGTERM')
            await done
          },
        })
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}: ${out}`))
    })
  })
}

export interface SharedDatabase {
  /** COFFER_* settings that point a process at the shared database with the shared key. */
  env: (dataDir: string) => Record<string, string>
  dataDir(): string
  drop(): Promise<void>
}

/**
 * One database several server processes share: a SQLite file, or a fresh schema on the test
 * PostgreSQL server (chosen per connection through the URL's `options`), with one master key.
 */
export async function sharedDatabase(): Promise<SharedDatabase> {
  const dirs: string[] = []
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-proc-'))
    dirs.push(dir)
    return dir
  }
  const masterKey = MasterKey.generate().toBase64()
  let url: string
  let dropSchema = async () => {}
  if (testDialect === 'postgres') {
    const schema = `coffer_proc_${randomBytes(6).toString('hex')}`
    const admin = new pg.Client({ connectionString: TEST_PG_URL })
    await admin.connect()
    await admin.query(`create schema ${schema}`)
    await admin.end()
    const u = new URL(TEST_PG_URL)
    u.searchParams.set('options', `-c search_path=${schema}`)
    url = u.toString()
    dropSchema = async () => {
      const c = new pg.Client({ connectionString: TEST_PG_URL })
      await c.connect()
      await c.query(`drop schema if exists ${schema} cascade`)
      await c.end()
    }
  } else {
    url = join(dataDir(), 'shared.db')
  }
  return {
    env: (dir) => ({
      COFFER_DATA_DIR: dir,
      COFFER_DATABASE_URL: url,
      COFFER_MASTER_KEY: masterKey,
    }),
    dataDir,
    drop: async () => {
      await dropSchema()
      for (const d of dirs) rmSync(d, { recursive: true, force: true })
    },
  }
}

/** The admin credentials the first start of an empty database wrote into its data folder. */
export function bootstrapCredentials(dataDir: string): { account_id: string; api_key: string } {
  return JSON.parse(readFileSync(join(dataDir, 'bootstrap-credentials.json'), 'utf8'))
}
