/** Starts server children (bench/server-child.ts) and tears them down with their data. */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import {
  type BareServerInfo,
  CHILD_ONLY_ENV,
  type CofferServerInfo,
  type ConsentServerInfo,
  ENV,
  type S3ServerInfo,
  type SearchServerInfo,
  type ServerInfo,
  type ServerKind,
} from './protocol.js'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const REPO_ROOT = dirname(BENCH_DIR)
const CHILD_SCRIPT = join(BENCH_DIR, 'server-child.ts')
/** Migrations, two OWASP-cost argon2 hashes, the fixtures: generous on a loaded 2-core box. */
const START_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 10_000

export interface ServerHandle<I extends ServerInfo> {
  info: I
  url: string
  /** The child's process id (its memory is read from /proc/<pid>/status). */
  pid: number
  /** Kills the child and removes its data; safe to call more than once. */
  stop(): Promise<void>
}

/** Every server still running, so an interrupted run can still clean up. */
const live = new Set<ServerHandle<ServerInfo>>()

export async function stopAll(): Promise<void> {
  await Promise.allSettled([...live].map((s) => s.stop()))
}

export function startBareServer(): Promise<ServerHandle<BareServerInfo>> {
  return startChild('bare', {}, async () => {})
}

export interface CofferOptions {
  /** PostgreSQL server for a fresh schema; default a fresh SQLite file in a temp dir. */
  pgUrl?: string | undefined
  /** BLOB content in this s3rver's bucket; default files in the temp dir. */
  s3?: ServerHandle<S3ServerInfo> | undefined
  /** `off`: login limits lifted, so a flood measures the bounded argon2 work alone. */
  loginLimits?: 'on' | 'off' | undefined
  /** `off`: no audit trail (the audit on/off pair of BENCH_PARTS `audit`). */
  audit?: 'on' | 'off' | undefined
  /** `off`: a plaintext SQLite file (the crypt on/off pair of BENCH_PARTS `crypt`). */
  sqliteEncryption?: 'on' | 'off' | undefined
}

/**
 * The real app on a fresh SQLite file in a temp dir, or a fresh schema on PostgreSQL, with its
 * fixtures (vaults and documents) created; BLOBs go to the temp dir, or to an s3rver child.
 */
export async function startCofferServer(
  options: CofferOptions = {},
): Promise<ServerHandle<CofferServerInfo>> {
  const { pgUrl, s3 } = options
  const env: Record<string, string> = {}
  if (options.loginLimits === 'off') env[ENV.loginLimits] = 'off'
  if (options.audit === 'off') env[ENV.audit] = 'off'
  if (options.sqliteEncryption === 'off') env[ENV.sqliteEncryption] = 'off'
  if (s3) {
    Object.assign(env, {
      [ENV.s3Endpoint]: s3.url,
      [ENV.s3Bucket]: s3.info.bucket,
      // The AWS SDK's notice that it will need Node 22 from 2027 is not a bench result.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    })
  }
  return startWithDatabase('coffer', env, pgUrl, START_TIMEOUT_MS)
}

/** The consent API on a fresh SQLite file or PostgreSQL schema, one consumer's record made. */
export function startConsentServer(
  pgUrl: string | undefined,
): Promise<ServerHandle<ConsentServerInfo>> {
  return startWithDatabase('consent', {}, pgUrl, START_TIMEOUT_MS)
}

/**
 * The real app with one vault of `documents` documents under one schema, written straight to a
 * fresh SQLite file (or PostgreSQL schema) before it listens; `startTimeoutMs` bounds that.
 * `settle()` waits until the child (and, on PostgreSQL, its database sessions) stop working.
 */
export async function startSearchServer(
  documents: number,
  pgUrl: string | undefined,
  startTimeoutMs: number,
  secondVaultDocuments = 0,
  sqliteEncryption: 'on' | 'off' = 'on',
): Promise<ServerHandle<SearchServerInfo> & { settle(): Promise<void> }> {
  // On PostgreSQL the work of abandoned requests goes on in the server's sessions: they are
  // found by this application_name (node-postgres reads PGAPPNAME).
  const appName = `coffer_bench_${randomBytes(6).toString('hex')}`
  const handle = await startWithDatabase<SearchServerInfo>(
    'search',
    {
      [ENV.searchDocuments]: String(documents),
      [ENV.searchSecondVault]: String(secondVaultDocuments),
      ...(sqliteEncryption === 'off' ? { [ENV.sqliteEncryption]: 'off' } : {}),
      ...(pgUrl ? { PGAPPNAME: appName } : {}),
    },
    pgUrl,
    startTimeoutMs,
  )
  const activeSessions = async () => {
    if (!pgUrl) return 0
    const rows = await pgQuery(
      pgUrl,
      `select count(*)::int as n from pg_stat_activity where application_name = $1 and state <> 'idle'`,
      [appName],
    )
    return Number(rows[0]?.n ?? 0)
  }
  return { ...handle, settle: () => waitForIdle(handle.pid, activeSessions) }
}

const IDLE_WINDOW_MS = 300
/** At most this much CPU time per window (10 ms clock ticks): an idle Node process uses ~none. */
const IDLE_TICKS = 2
const SETTLE_LIMIT_MS = 300_000

/** CPU time (clock ticks, utime + stime) a process has used: /proc/<pid>/stat, Linux only. */
function cpuTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // After "pid (comm) ": state is field 3, utime field 14, stime field 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(fields[11]) + Number(fields[12])
  } catch {
    return undefined
  }
}

/** Waits (bounded) until a window passes with the process idle and no busy database session. */
async function waitForIdle(pid: number, activeSessions: () => Promise<number>): Promise<void> {
  const deadline = Date.now() + SETTLE_LIMIT_MS
  let before = cpuTicks(pid)
  while (Date.now() < deadline) {
    await sleep(IDLE_WINDOW_MS)
    const now = cpuTicks(pid)
    const idle = before === undefined || now === undefined || now - before <= IDLE_TICKS
    before = now
    if (idle && (await activeSessions()) === 0) return
  }
  process.stderr.write(`!!! server ${pid} still busy after ${SETTLE_LIMIT_MS / 1000} s\n`)
}

/** A child on a fresh SQLite file in a temp dir or a fresh PostgreSQL schema, both removed. */
async function startWithDatabase<I extends CofferServerInfo | SearchServerInfo | ConsentServerInfo>(
  kind: I['kind'],
  extraEnv: Record<string, string>,
  pgUrl: string | undefined,
  startTimeoutMs: number,
): Promise<ServerHandle<I>> {
  // The temp dir also holds the BLOB files (fs store) when the database is PostgreSQL.
  const dir = mkdtempSync(join(tmpdir(), 'coffer-bench-'))
  const env: Record<string, string> = { ...extraEnv, [ENV.dataDir]: dir }
  const removeDir = async () => rmSync(dir, { recursive: true, force: true })
  if (pgUrl) {
    const schema = `coffer_bench_${randomBytes(6).toString('hex')}`
    try {
      await pgQuery(pgUrl, `create schema ${schema}`)
    } catch (error) {
      await removeDir()
      throw error
    }
    Object.assign(env, { [ENV.pgUrl]: pgUrl, [ENV.pgSchema]: schema })
    return startChild<I>(
      kind,
      env,
      async () => {
        try {
          await pgQuery(pgUrl, `drop schema if exists ${schema} cascade`)
        } finally {
          await removeDir()
        }
      },
      startTimeoutMs,
    )
  }
  return startChild<I>(kind, env, removeDir, startTimeoutMs)
}

/** s3rver with one empty bucket, in its own process, storing into a temp dir. */
export function startS3Server(): Promise<ServerHandle<S3ServerInfo>> {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-bench-s3-'))
  return startChild('s3', { [ENV.dataDir]: dir }, async () => {
    rmSync(dir, { recursive: true, force: true })
  })
}

async function pgQuery(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: url, application_name: 'coffer_bench_parent' })
  await client.connect()
  try {
    return (await client.query(text, values)).rows
  } finally {
    await client.end()
  }
}

function startChild<I extends ServerInfo>(
  kind: I['kind'] & ServerKind,
  env: Record<string, string>,
  removeData: () => Promise<void>,
  startTimeoutMs = START_TIMEOUT_MS,
): Promise<ServerHandle<I>> {
  const inherited = { ...process.env }
  for (const name of CHILD_ONLY_ENV) delete inherited[name]
  // BENCH_CPU_PROF_DIR: each child writes a V8 CPU profile there when it stops (node --cpu-prof).
  const profDir = process.env.BENCH_CPU_PROF_DIR
  const profile = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', CHILD_SCRIPT, kind], {
    cwd: REPO_ROOT,
    env: { ...inherited, ...env },
    // stdin stays open: the child exits when it closes (if this process dies unexpectedly).
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  let stopped: Promise<void> | undefined
  const handle: ServerHandle<ServerInfo> = {
    info: { kind: 'bare', port: 0 },
    url: '',
    pid: child.pid ?? 0,
    stop: () => {
      stopped ??= (async () => {
        live.delete(handle)
        try {
          await killChild(child)
        } finally {
          await removeData()
        }
      })()
      return stopped
    },
  }
  live.add(handle)

  return new Promise<ServerHandle<I>>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })
    let settled = false
    const fail = (error: Error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      handle.stop().then(
        () => reject(error),
        () => reject(error),
      )
    }
    const timer = setTimeout(
      () => fail(new Error(`${kind} server did not start within ${startTimeoutMs} ms`)),
      startTimeoutMs,
    )
    child.once('error', fail)
    child.once('exit', (code, signal) =>
      fail(new Error(`${kind} server exited before it was ready (${signal ?? `code ${code}`})`)),
    )
    lines.on('line', (line) => {
      if (settled) {
        process.stderr.write(`[${kind} server] ${line}\n`)
        return
      }
      let info: I
      try {
        info = JSON.parse(line) as I
      } catch {
        fail(new Error(`${kind} server printed something other than its JSON info: ${line}`))
        return
      }
      if (info.kind !== kind || !Number.isInteger(info.port) || info.port <= 0) {
        fail(new Error(`${kind} server printed unexpected info: ${line}`))
        return
      }
      settled = true
      clearTimeout(timer)
      handle.info = info
      handle.url = `http://127.0.0.1:${info.port}`
      resolve(handle as ServerHandle<I>)
    })
  })
}

function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS)
    child.once('exit', () => {
      clearTimeout(force)
      resolve()
    })
    child.kill('SIGTERM')
    child.stdin?.end()
  })
}
