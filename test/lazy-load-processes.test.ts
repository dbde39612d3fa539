import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { basicHeader } from './helpers/app.js'
import {
  bootstrapCredentials,
  cofferEnv,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from './helpers/processes.js'
import { testDialect } from './helpers/store.js'

/**
 * Issue 21, idle RSS: what only some nodes or requests need is loaded on first use. The AWS SDK
 * (~25 MB resident) is for the S3 store and backups to S3 only: a node on the file store that
 * serves requests never loads it, even though the backup module names the S3 store statically.
 * Each process runs with a preload (helpers/loaded-packages.cjs) that lists, at exit, the
 * files it loaded from the packages watched.
 */
const PRELOAD = fileURLToPath(new URL('./helpers/loaded-packages.cjs', import.meta.url))
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const execFileAsync = promisify(execFile)
const YOUNG = fileURLToPath(new URL('./helpers/young-generation.cjs', import.meta.url))
const MiB = 1024 * 1024

describe(`modules loaded on first use (${testDialect})`, () => {
  let db: SharedDatabase
  let dir: string
  beforeAll(async () => {
    db = await sharedDatabase()
    dir = mkdtempSync(join(tmpdir(), 'coffer-lazy-'))
  })
  afterAll(async () => {
    await db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })

  const watch = (file: string) => ({
    LOADED_PACKAGES: '@aws-sdk,@smithy',
    LOADED_PACKAGES_FILE: file,
  })
  const loaded = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as string[]

  it('a node on the file store serves requests without loading the AWS SDK', async () => {
    const file = join(dir, 'serve.json')
    const dataDir = db.dataDir()
    const server = await startServerProcess({
      ...db.env(dataDir),
      ...watch(file),
      NODE_OPTIONS: `--require ${PRELOAD}`,
    })
    try {
      const admin = bootstrapCredentials(dataDir)
      const auth = { authorization: basicHeader(admin.api_key) }
      const me = await fetch(`${server.url}/v1/auth/me`, { headers: auth })
      expect(me.status).toBe(200)
      const vault = await fetch(`${server.url}/v1/vaults`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ name: 'lazy' }).toString(),
      })
      expect(vault.status).toBe(200)
    } finally {
      await server.stop()
    }
    expect(loaded(file)).toEqual([])
  }, 60_000)

  it('the S3 store loads it on its first use, and its objects are the SDK’s own', async () => {
    // The control: the preload does see the SDK once something constructs an S3 client.
    const file = join(dir, 'store.json')
    const script = `
      const { createRequire } = await import('node:module')
      const require = createRequire(process.cwd() + '/')
      const { s3Sdk, PutObjectCommand, S3Client } = await import(${JSON.stringify(new URL('../src/blob/s3-sdk.ts', import.meta.url).href)})
      const { S3BlobStore } = await import(${JSON.stringify(new URL('../src/blob/s3-blob-store.ts', import.meta.url).href)})
      const before = Object.keys(require.cache).some((f) => f.includes('/@aws-sdk/'))
      const store = new S3BlobStore({ region: 'us-east-1', bucket: 'b', endpoint: 'http://127.0.0.1:9' })
      const command = new PutObjectCommand({ Bucket: 'b', Key: 'k' })
      const client = new S3Client({ region: 'us-east-1' })
      console.log(JSON.stringify({
        before,
        command: command instanceof s3Sdk().PutObjectCommand,
        name: command.constructor.name,
        input: command.input,
        client: client instanceof s3Sdk().S3Client,
      }))
      store.close()
      client.destroy()
    `
    const { stdout } = await execFileAsync(
      process.execPath,
      ['--require', PRELOAD, '--import', TSX, '--input-type=module', '-e', script],
      { env: { ...process.env, ...watch(file) } },
    )
    expect(JSON.parse(stdout)).toEqual({
      before: false,
      command: true,
      name: 'PutObjectCommand',
      input: { Bucket: 'b', Key: 'k' },
      client: true,
    })
    expect(loaded(file).some((f) => f.includes('/@aws-sdk/client-s3/'))).toBe(true)
  }, 60_000)
})

/**
 * The `coffer` command (src/coffer.ts) holds V8's young generation at its first size while the
 * program loads (lib/startup-heap.ts); `serve` lets it grow once it listens. Each server runs
 * with a preload (helpers/young-generation.cjs) that writes the young generation's resident
 * size at exit; src/main.ts run directly (no hold) is the control: its loading grows it to 32 MiB.
 */
describe(`the young generation while coffer loads (${testDialect})`, () => {
  let db: SharedDatabase
  let dir: string
  beforeAll(async () => {
    db = await sharedDatabase()
    dir = mkdtempSync(join(tmpdir(), 'coffer-young-'))
  })
  afterAll(async () => {
    await db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Starts `serve` from the entry, waits for it to listen and 500 ms more, stops it. */
  async function youngAfterStart(entry: 'coffer' | 'main'): Promise<number> {
    const file = join(dir, `${entry}.young`)
    const dataDir = db.dataDir()
    const script = fileURLToPath(new URL(`../src/${entry}.ts`, import.meta.url))
    const child = spawn(process.execPath, ['--require', YOUNG, '--import', TSX, script, 'serve'], {
      env: cofferEnv({
        ...db.env(dataDir),
        COFFER_PORT: '0',
        COFFER_SERVE: 'api',
        YOUNG_GENERATION_FILE: file,
      }),
    })
    let out = ''
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start: ${out}`)), 45_000)
      const onData = (chunk: Buffer) => {
        out += chunk.toString()
        const m = /listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
        if (!m) return
        clearTimeout(timer)
        resolve(m[1] as string)
      }
      child.stdout.on('data', onData)
      child.stderr.on('data', onData)
      child.once('exit', (code) => reject(new Error(`exited with ${code}: ${out}`)))
    })
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
    await sleep(500)
    const exited = new Promise((r) => child.once('exit', r))
    child.kill('SIGTERM')
    await exited
    return Number(readFileSync(file, 'utf8'))
  }

  it('coffer serve idles with a young generation of a few MiB; main.ts unheld grows it', async () => {
    const held = await youngAfterStart('coffer')
    const unheld = await youngAfterStart('main')
    expect(held).toBeGreaterThan(0)
    expect(held).toBeLessThanOrEqual(8 * MiB)
    expect(unheld).toBeGreaterThanOrEqual(16 * MiB)
  }, 120_000)

  it('held, surviving allocations do not grow it; released, they do (requests keep their GC)', async () => {
    // In a process of its own: V8 flags are the whole process's.
    const script = `
      const { getHeapSpaceStatistics } = await import('node:v8')
      const { holdStartupHeap, startupHeapDone } = await import(${JSON.stringify(new URL('../src/lib/startup-heap.ts', import.meta.url).href)})
      const young = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size
      const churn = () => {
        // Objects that live across several scavenges: what makes V8 grow the young generation.
        const keep = []
        for (let i = 0; i < 400_000; i++) {
          keep.push({ i, s: 'x' + i })
          if (keep.length > 100_000) keep.splice(0, 50_000)
        }
        return keep.length
      }
      const before = young()
      const holding = holdStartupHeap()
      churn()
      const held = young()
      startupHeapDone()
      churn()
      churn()
      console.log(JSON.stringify({ before, holding, held, released: young() }))
    `
    const { stdout } = await execFileAsync(
      process.execPath,
      ['--import', TSX, '--input-type=module', '-e', script],
      { env: { ...process.env, NODE_OPTIONS: '' } },
    )
    const r = JSON.parse(stdout) as Record<string, number | boolean>
    expect(r.holding).toBe(true)
    expect(r.held).toBe(r.before)
    expect(r.released as number).toBeGreaterThan(r.held as number)
  }, 60_000)
})
