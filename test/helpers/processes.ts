import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import SQLite from 'better-sqlite3-multiple-ciphers'
import pg from 'pg'
import { MasterKey } from '../../src/crypto/master-key.js'
import { MasterKeySet } from '../../src/crypto/master-key-set.js'
import type { AccountCredentials } from '../../src/modules/accounts/accounts.service.js'
import { fileKeyFor } from '../../src/modules/keys/file-key.js'
import { isPostgresUrl, openStore, type Store } from '../../src/store/db.js'
import { applySqliteKey } from '../../src/store/sqlite-cipher.js'
import { TEST_PG_URL, testDialect } from './store.js'

/** The repository's root: where `src/` and `node_modules/` are, whatever the working directory. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Absolute, so a process may run in another working directory (a folder with its own `.env`). */
const MAIN = [
  '--import',
  pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href,
  fileURLToPath(new URL('../../src/main.ts', import.meta.url)),
]
const execFileAsync = promisify(execFile)

export interface ServerProcess {
  url: string
  child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far (its log). */
  output(): string
  stop(): Promise<void>
}

/**
 * The environment of a spawned `coffer`: only the given COFFER_ settings, none inherited, and
 * no `.env` read (a developer's own would leak in) unless a test sets COFFER_ENV_FILE.
 */
export function cofferEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = { ...process.env }
  for (const k of Object.keys(base)) if (k.startsWith('COFFER_')) delete base[k]
  return { ...base, COFFER_LOG_LEVEL: 'info', COFFER_ENV_FILE: 'none', ...extra }
}

/** Runs one `coffer` command to its end; rejects when it exits non-zero (see cofferFails). */
export function runCoffer(
  args: string[],
  env: Record<string, string>,
  options: { cwd?: string } = {},
): Promise<{ stdout: string; stderr: string }> {
  return execFileAsync(process.execPath, [...MAIN, ...args], { env: cofferEnv(env), ...options })
}

/** Runs one `coffer` command that must fail; throws if it succeeds. */
export async function cofferFails(
  args: string[],
  env: Record<string, string>,
  options: { cwd?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout } = await runCoffer(args, env, options)
    throw new Error(`coffer ${args.join(' ')} succeeded: ${stdout}`)
  } catch (e) {
    const failed = e as { code?: unknown; stdout?: string; stderr?: string }
    if (typeof failed.code !== 'number') throw e
    return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' }
  }
}

/**
 * Starts `coffer serve` as its own process; resolves once it listens. `cwd`: the working
 * directory it runs in (its default data folder is `./data` there).
 */
export function startServerProcess(
  env: Record<string, string>,
  options: { cwd?: string } = {},
): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...MAIN, 'serve'], {
    // The main API only: these tests are about it, and a consent listener would need its own
    // port and, on PostgreSQL, a shared secret.
    env: cofferEnv({ COFFER_PORT: '0', COFFER_SERVE: 'api', ...env }),
    ...options,
  })
  let out = ''
  let listening = false
  const exited = () => child.exitCode !== null || child.signalCode !== null
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`server did not start: ${out}`))
    }, 30_000)
    // Collects the whole log, also after the start: tests read it (and the pipes never fill).
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      const m = listening ? null : /listening at (https?:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (!m) return
      listening = true
      clearTimeout(timer)
      resolve({
        url: m[1] as string,
        child,
        output: () => out,
        stop: async () => {
          if (exited()) return
          const done = new Promise((r) => child.once('exit', r))
          child.kill('SIGTERM')
          await done
        },
      })
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
  /** The key the server processes get, for an app of the test process on the same data. */
  masterKey: MasterKey
  /** A fresh temporary folder, removed by drop(). */
  dataDir(): string
  /** A store of the test process itself on the same database (close it before drop()). */
  open(): Store
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
  const masterKey = MasterKey.generate()
  let url: string
  let dropSchema = async () => {}
  // PostgreSQL means a cluster: its nodes must be told where the BLOBs every node sees live.
  let blobs: Record<string, string> = {}
  if (testDialect === 'postgres') {
    blobs = clusterBlobEnv(join(dataDir(), 'blobs'))
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
      COFFER_MASTER_KEY: masterKey.toBase64(),
      ...blobs,
    }),
    masterKey,
    dataDir,
    // The same URL the servers get: the SQLite file, or PostgreSQL with the schema in `options`.
    open: () => openCofferStore(url, masterKey, { pg: { poolSize: 3 } }),
    drop: async () => {
      await dropSchema()
      for (const d of dirs) rmSync(d, { recursive: true, force: true })
    },
  }
}

/**
 * A store of the test process on the database `coffer` processes use: a SQLite file is opened
 * with its file key, unwrapped from the key file beside it (made now if the file is new, as a
 * process would) by the master key given — or the key file `master.key` beside the database
 * (the data folder's default).
 */
export function openCofferStore(
  url: string,
  masterKey?: MasterKey,
  options: Omit<Parameters<typeof openStore>[0], 'url' | 'sqliteKey'> = {},
): Store {
  if (isPostgresUrl(url) || url === ':memory:') return openStore({ ...options, url })
  const key =
    masterKey ?? MasterKey.fromBase64(readFileSync(join(dirname(url), 'master.key'), 'utf8'))
  return openStore({ ...options, url, sqliteKey: fileKeyFor(url, new MasterKeySet(key)) })
}

/** A raw connection to the SQLite file of a `coffer` data folder (keyed as openCofferStore). */
export function openCofferSqliteFile(
  url: string,
  options: SQLite.Options = {},
  masterKey?: MasterKey,
): SQLite.Database {
  const key =
    masterKey ?? MasterKey.fromBase64(readFileSync(join(dirname(url), 'master.key'), 'utf8'))
  const db = new SQLite(url, options)
  try {
    applySqliteKey(db, fileKeyFor(url, new MasterKeySet(key)), url)
  } catch (error) {
    db.close()
    throw error
  }
  return db
}

/**
 * The settings a node on PostgreSQL needs for its BLOBs (issue 12, point 7): a folder declared
 * shared by every node. `coffer serve` on PostgreSQL refuses to start without such a choice.
 */
export function clusterBlobEnv(dir: string): Record<string, string> {
  return { COFFER_BLOB_STORE: 'fs', COFFER_BLOB_DIR: dir, COFFER_BLOB_DIR_SHARED: 'true' }
}

/** The admin credentials the first start of an empty database wrote into its data folder. */
export function bootstrapCredentials(dataDir: string): AccountCredentials {
  return JSON.parse(readFileSync(join(dataDir, 'bootstrap-credentials.json'), 'utf8'))
}

/** Waits until a server process's log matches (10 s at most). */
export async function waitForOutput(
  server: ServerProcess,
  pattern: RegExp,
): Promise<RegExpExecArray> {
  for (let i = 0; i < 200; i++) {
    const m = pattern.exec(server.output())
    if (m) return m
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`not in the log: ${pattern}\n${server.output()}`)
}
