/** Starts server children (bench/server-child.ts) and tears them down with their data. */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import {
  type BareServerInfo,
  type CofferServerInfo,
  ENV,
  type ServerInfo,
  type ServerKind,
} from './protocol.js'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const REPO_ROOT = dirname(BENCH_DIR)
const CHILD_SCRIPT = join(BENCH_DIR, 'server-child.ts')
/** Migrations plus two argon2 hashes at OWASP cost; generous for a loaded 2-core machine. */
const START_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 10_000

export interface ServerHandle<I extends ServerInfo> {
  info: I
  url: string
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

/** The real app on a fresh SQLite file in a temp dir, or a fresh schema on PostgreSQL. */
export async function startCofferServer(pgUrl?: string): Promise<ServerHandle<CofferServerInfo>> {
  if (pgUrl) {
    const schema = `coffer_bench_${randomBytes(6).toString('hex')}`
    await pgQuery(pgUrl, `create schema ${schema}`)
    return startChild('coffer', { [ENV.pgUrl]: pgUrl, [ENV.pgSchema]: schema }, () =>
      pgQuery(pgUrl, `drop schema if exists ${schema} cascade`),
    )
  }
  const dir = mkdtempSync(join(tmpdir(), 'coffer-bench-'))
  return startChild('coffer', { [ENV.dataDir]: dir }, async () => {
    rmSync(dir, { recursive: true, force: true })
  })
}

async function pgQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

function startChild<I extends ServerInfo>(
  kind: I['kind'] & ServerKind,
  env: Record<string, string>,
  removeData: () => Promise<void>,
): Promise<ServerHandle<I>> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD_SCRIPT, kind], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    // stdin stays open: the child exits when it closes (if this process dies unexpectedly).
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  let stopped: Promise<void> | undefined
  const handle: ServerHandle<ServerInfo> = {
    info: { kind: 'bare', port: 0 },
    url: '',
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
      () => fail(new Error(`${kind} server did not start within ${START_TIMEOUT_MS} ms`)),
      START_TIMEOUT_MS,
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
