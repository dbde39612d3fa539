import { type ChildProcess, execFile, spawn } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CREDENTIALS_FILE } from '../../src/modules/accounts/bootstrap.js'
import {
  dockerStages,
  fillSecrets,
  healthcheckCommand,
  nodeSettings,
  parseEnvFile,
  ROOT,
  read,
} from '../helpers/deploy-recipe.js'
import { cofferEnv, type SharedDatabase, sharedDatabase } from '../helpers/processes.js'
import { startS3Server, type TestS3Server } from '../helpers/s3.js'
import { testDialect } from '../helpers/store.js'

/**
 * The image's runtime, without Docker: `npm run build`'s output started the way the image's
 * ENTRYPOINT does (`node dist/coffer.js serve`), with a compose node's settings (hosts pointed at
 * the test database and an S3 server), as the image's unprivileged user when the tests run as
 * root, probed with the image's HEALTHCHECK command as Docker runs it.
 */

const execFileAsync = promisify(execFile)
/** The image's /app: package.json (ESM), node_modules (here a link to ours), dist/. */
const APP = mkdtempSync(join(tmpdir(), 'coffer-image-app-'))
const OUT = join(APP, 'dist')
const IMAGE_UID = 10001
const asImageUser = process.getuid?.() === 0

const image = dockerStages(read('Dockerfile')).at(-1)?.instructions ?? []
const [checkBinary, ...checkArgs] = healthcheckCommand(image)

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

describe('image entry: dist/coffer.js serve with the compose settings', () => {
  let db: SharedDatabase
  let s3: TestS3Server
  let env: NodeJS.ProcessEnv
  let dataDir: string
  let child: ChildProcess
  let log = ''

  /** Docker's HEALTHCHECK: the command in the container's environment; exit 0 is healthy. */
  async function healthy(): Promise<boolean> {
    expect(checkBinary).toBe('node')
    try {
      await execFileAsync(process.execPath, checkArgs, { env })
      return true
    } catch (e) {
      expect((e as { code?: unknown }).code).toBe(1)
      return false
    }
  }

  beforeAll(async () => {
    // `npm run build` (tsc -p tsconfig.build.json), into a folder of this test's own.
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
    await execFileAsync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', OUT], {
      cwd: ROOT,
    })
    copyFileSync(join(ROOT, 'package.json'), join(APP, 'package.json'))
    symlinkSync(join(ROOT, 'node_modules'), join(APP, 'node_modules'))
    chmodSync(APP, 0o755)
    db = await sharedDatabase()
    s3 = await startS3Server('coffer')
    dataDir = db.dataDir()
    if (asImageUser) chownSync(dataDir, IMAGE_UID, IMAGE_UID)
    const shared = db.env(dataDir)
    const [port, consentPort] = [await freePort(), await freePort()]
    env = cofferEnv({
      ...nodeSettings(fillSecrets(parseEnvFile(read('deploy/cluster.env.example')))),
      // The compose hosts (postgres, minio), here: the test database and S3 server.
      COFFER_DATA_DIR: dataDir,
      COFFER_DATABASE_URL:
        testDialect === 'postgres'
          ? (shared.COFFER_DATABASE_URL as string)
          : join(dataDir, 'coffer.db'),
      COFFER_S3_ENDPOINT: s3.endpoint,
      COFFER_S3_ACCESS_KEY_ID: s3.accessKeyId,
      COFFER_S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
      COFFER_PORT: String(port),
      COFFER_CONSENT_PORT: String(consentPort),
    })
    child = spawn(process.execPath, ['dist/coffer.js', 'serve'], {
      cwd: APP,
      env,
      ...(asImageUser ? { uid: IMAGE_UID, gid: IMAGE_UID } : {}),
    })
    const collect = (chunk: Buffer) => {
      log += chunk.toString()
    }
    child.stdout?.on('data', collect)
    child.stderr?.on('data', collect)
  }, 180_000)

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const done = new Promise((r) => child.once('exit', r))
      child.kill('SIGKILL')
      await done
    }
    rmSync(APP, { recursive: true, force: true })
    await s3?.close()
    await db?.drop()
  })

  it('the build output holds the ENTRYPOINT’s file', () => {
    expect(existsSync(join(OUT, 'coffer.js'))).toBe(true)
  })

  it('turns healthy (database, migrations, S3 ready) as the unprivileged user', async () => {
    let ready = false
    for (let i = 0; i < 120 && !ready; i++) {
      expect(child.exitCode, log).toBeNull()
      ready = await healthy()
      if (!ready) await new Promise((r) => setTimeout(r, 250))
    }
    expect(ready, log).toBe(true)
    const consent = await fetch(`http://127.0.0.1:${env.COFFER_CONSENT_PORT}/readyz`)
    expect(consent.status).toBe(200)
    // The first account's credentials: in the data folder, the process user's, 0600.
    const credentials = statSync(join(dataDir, CREDENTIALS_FILE))
    expect(credentials.mode & 0o777).toBe(0o600)
    if (asImageUser) {
      expect(credentials.uid).toBe(IMAGE_UID)
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
      expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe(String(IMAGE_UID))
    }
  }, 60_000)

  it('on SIGTERM turns unhealthy at once, drains for the compose delay and exits 0', async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
    const signalled = Date.now()
    child.kill('SIGTERM')
    let unhealthy = false
    for (let i = 0; i < 20 && !unhealthy; i++) unhealthy = !(await healthy())
    expect(unhealthy).toBe(true)
    expect(Date.now() - signalled).toBeLessThan(Number(env.COFFER_SHUTDOWN_DELAY_MS))
    expect(await exited, log).toBe(0)
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(Number(env.COFFER_SHUTDOWN_DELAY_MS))
  }, 60_000)
})
