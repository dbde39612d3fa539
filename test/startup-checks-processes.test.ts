import { existsSync, readdirSync, writeFileSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cofferFails, type SharedDatabase, sharedDatabase } from './helpers/processes.js'
import { startS3Server, type TestS3Server } from './helpers/s3.js'
import { TEST_PG_URL, testDialect } from './helpers/store.js'

/**
 * Issue 17: settings that cannot work fail the start, naming the setting, before anything is
 * written. Was: a bad COFFER_HOST failed only after the first account was created; a missing
 * bucket or an unreachable S3 endpoint answered 500 on the first upload.
 */
describe(`coffer serve refuses to start before writing anything (${testDialect})`, () => {
  let db: SharedDatabase
  let s3: TestS3Server
  let silent: Server
  const sockets: Socket[] = []

  beforeAll(async () => {
    db = await sharedDatabase()
    s3 = await startS3Server('coffer-present')
    silent = createServer((socket) => sockets.push(socket))
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r))
  })
  afterAll(async () => {
    for (const s of sockets) s.destroy()
    await new Promise((r) => silent?.close(r))
    await s3?.close()
    await db?.drop()
  })

  /** Nothing in the node's folder, and no table in the database (not even migrations ran). */
  async function expectNothingWritten(dir: string): Promise<void> {
    expect(readdirSync(dir)).toEqual([])
    const env = db.env(dir)
    if (testDialect === 'sqlite') {
      expect(existsSync(env.COFFER_DATABASE_URL as string)).toBe(false)
      return
    }
    const store = db.open()
    try {
      const { rows } = await sql<{ n: string }>`
        select count(*) as n from information_schema.tables where table_schema = current_schema()`.execute(
        store.db,
      )
      expect(Number(rows[0]?.n)).toBe(0)
    } finally {
      await store.close()
    }
  }

  async function refused(extra: Record<string, string>) {
    const dir = db.dataDir()
    const failed = await cofferFails(['serve'], { ...db.env(dir), COFFER_PORT: '0', ...extra })
    expect(failed.code).toBe(1)
    await expectNothingWritten(dir)
    return failed.stderr
  }

  it('an address this machine does not have', async () => {
    const stderr = await refused({ COFFER_HOST: '192.0.2.1', COFFER_SERVE: 'api' })
    expect(stderr).toContain(
      'cannot listen on 192.0.2.1:0 (COFFER_HOST/COFFER_PORT): this machine has no such address (EADDRNOTAVAIL)',
    )
  }, 30_000)

  it('a consent port in use', async () => {
    const address = silent.address()
    if (!address || typeof address === 'string') throw new Error('no port')
    const stderr = await refused({
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: String(address.port),
      COFFER_CONSENT_JWT_SECRET: 'a consent secret of at least 32 characters',
    })
    expect(stderr).toContain(
      `cannot listen on 127.0.0.1:${address.port} (COFFER_CONSENT_HOST/COFFER_CONSENT_PORT): the port is in use (EADDRINUSE)`,
    )
  }, 30_000)

  it('a host that is not an address at all (settings are all checked first)', async () => {
    const stderr = await refused({ COFFER_HOST: 'http://0.0.0.0' })
    expect(stderr).toContain('COFFER_HOST must be an IP address or a host name')
  }, 30_000)

  const s3Env = (extra: Record<string, string>) => ({
    COFFER_BLOB_STORE: 's3',
    COFFER_BLOB_DIR: '',
    COFFER_BLOB_DIR_SHARED: '',
    COFFER_S3_ENDPOINT: s3.endpoint,
    COFFER_S3_BUCKET: 'coffer-present',
    COFFER_S3_FORCE_PATH_STYLE: 'true',
    COFFER_S3_ACCESS_KEY_ID: s3.accessKeyId,
    COFFER_S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    COFFER_SERVE: 'api',
    ...extra,
  })

  it('an S3 bucket that does not exist', async () => {
    const stderr = await refused(s3Env({ COFFER_S3_BUCKET: 'coffer-absent' }))
    expect(stderr).toContain(
      `the BLOB store is not usable: COFFER_S3_BUCKET "coffer-absent" does not exist at COFFER_S3_ENDPOINT ${s3.endpoint}`,
    )
  }, 30_000)

  it('an S3 endpoint nothing listens on, or one that never answers (bounded)', async () => {
    const closed = 'http://127.0.0.1:1'
    expect(await refused(s3Env({ COFFER_S3_ENDPOINT: closed }))).toContain(
      `COFFER_S3_ENDPOINT ${closed} could not be reached (ECONNREFUSED)`,
    )
    const address = silent.address()
    if (!address || typeof address === 'string') throw new Error('no port')
    const hung = `http://127.0.0.1:${address.port}`
    const stderr = await refused(
      s3Env({ COFFER_S3_ENDPOINT: hung, COFFER_BLOB_CHECK_TIMEOUT_MS: '500' }),
    )
    expect(stderr).toContain(
      `COFFER_S3_ENDPOINT ${hung} did not answer within 500 ms (COFFER_BLOB_CHECK_TIMEOUT_MS)`,
    )
  }, 60_000)

  it('an S3 endpoint that is not a URL', async () => {
    const stderr = await refused(s3Env({ COFFER_S3_ENDPOINT: 'minio:9000' }))
    expect(stderr).toContain(
      'COFFER_S3_ENDPOINT must be an http(s) URL without credentials, query or fragment',
    )
  }, 30_000)

  it('a BLOB folder that cannot be created', async () => {
    const blocked = join(db.dataDir(), 'a-file')
    writeFileSync(blocked, 'in the way')
    const stderr = await refused({
      COFFER_BLOB_STORE: 'fs',
      COFFER_BLOB_DIR: join(blocked, 'blobs'),
      COFFER_BLOB_DIR_SHARED: 'true',
      COFFER_SERVE: 'api',
    })
    expect(stderr).toContain(
      `the BLOB store is not usable: COFFER_BLOB_DIR folder ${join(blocked, 'blobs')} cannot be created or written to by this process (ENOTDIR)`,
    )
  }, 30_000)

  it('PostgreSQL with the per-node BLOB folder (issue 12, point 7)', async () => {
    // Refused before the database is reached: in the SQLite run too.
    const stderr = await refused({
      COFFER_DATABASE_URL: TEST_PG_URL,
      COFFER_BLOB_STORE: '',
      COFFER_BLOB_DIR: '',
      COFFER_BLOB_DIR_SHARED: '',
      COFFER_SERVE: 'api',
    })
    expect(stderr).toContain(
      'COFFER_BLOB_STORE must be set with a PostgreSQL database, where several nodes share the data: s3, or fs with COFFER_BLOB_DIR (a folder every node mounts) and COFFER_BLOB_DIR_SHARED=true',
    )
  }, 30_000)
})
