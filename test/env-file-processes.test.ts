import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  bootstrapCredentials,
  cofferFails,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from './helpers/processes.js'
import { testDialect } from './helpers/store.js'

/**
 * Issue 17: `.env.example` was offered but `.env` never read. `coffer` now reads `.env` from its
 * working directory; a variable exported in the environment wins over the file.
 */
describe(`coffer reads .env from its working directory (${testDialect})`, () => {
  let db: SharedDatabase
  let busy: Server
  let busyPort: number
  const dirs: string[] = []
  const folder = () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-dotenv-'))
    dirs.push(dir)
    return dir
  }

  beforeAll(async () => {
    db = await sharedDatabase()
    busy = createServer()
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r))
    busyPort = (busy.address() as { port: number }).port
  })
  afterAll(async () => {
    await new Promise((r) => busy?.close(r))
    await db?.drop()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  it('a setting in .env takes effect and an exported variable wins', async () => {
    const cwd = folder()
    const dataDir = db.dataDir()
    const settings = { ...db.env(dataDir) }
    // The data folder (and the database, the key) only in the file; the port in both: the file's
    // port is taken, so the server starts only if the exported COFFER_PORT=0 wins.
    writeFileSync(
      join(cwd, '.env'),
      [
        '# as an operator copies .env.example',
        ...Object.entries(settings).map(([k, v]) => `${k}="${v}"`),
        `COFFER_PORT=${busyPort}`,
        'COFFER_LOG_LEVEL=info',
      ].join('\n'),
    )
    const server = await startServerProcess({ COFFER_ENV_FILE: '', COFFER_PORT: '0' }, { cwd })
    try {
      const { api_key } = bootstrapCredentials(dataDir)
      const me = await fetch(`${server.url}/v1/auth/me`, {
        headers: { authorization: `Basic ${Buffer.from(`${api_key}:`).toString('base64')}` },
      })
      expect(me.status).toBe(200)
      expect(server.url).not.toContain(`:${busyPort}`)
      const log = server.output()
      expect(log).toContain('read settings file')
      expect(log).toContain(join(cwd, '.env'))
      // Names are logged, values never: the master key is in the file.
      expect(log).toContain('COFFER_MASTER_KEY')
      expect(log).not.toContain(settings.COFFER_MASTER_KEY as string)
      expect(log).not.toMatch(/"COFFER_PORT"/)
    } finally {
      await server.stop()
    }
  }, 60_000)

  it('COFFER_ENV_FILE=none ignores it; a malformed one stops the start, naming the line', async () => {
    const cwd = folder()
    const dataDir = db.dataDir()
    writeFileSync(join(cwd, '.env'), 'COFFER_LOG_LEVEL=info\nCOFFER_MASTER_KEY s3cr3t-value\n')
    const failed = await cofferFails(
      ['serve'],
      { ...db.env(dataDir), COFFER_ENV_FILE: '' },
      { cwd },
    )
    expect(failed.code).toBe(1)
    expect(failed.stderr).toContain(`${join(cwd, '.env')} line 2: expected NAME=value`)
    expect(failed.stderr).not.toContain('s3cr3t-value')
    expect(readdirSync(dataDir)).toEqual([])

    // The helper's default, COFFER_ENV_FILE=none: the same malformed file is not even read.
    const ignoring = await startServerProcess({ ...db.env(dataDir) }, { cwd })
    try {
      expect(ignoring.output()).not.toContain('read settings file')
    } finally {
      await ignoring.stop()
    }
  }, 60_000)
})
