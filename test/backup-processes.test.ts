import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { basicHeader } from './helpers/app.js'
import { expectNoValuesIn } from './helpers/backup.js'
import { logicalDump } from './helpers/db-dump.js'
import {
  bootstrapCredentials,
  cofferFails,
  openCofferStore,
  runCoffer,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from './helpers/processes.js'
import { startS3Server, type TestS3Server } from './helpers/s3.js'
import { testDialect } from './helpers/store.js'

/**
 * `coffer backup create | verify | restore` as an operator runs them (issue 22, part 2): create
 * beside a `coffer serve` process under a read/write load (no request fails), verify, restore
 * into an empty database and BLOB store, start a server on it and read back every record
 * acknowledged before create began, byte for byte; the audit trail still verifies; a second
 * restore into the now full target is refused and changes nothing. On the test database (SQLite
 * or PostgreSQL), to a file and to S3.
 */

interface Acked {
  at: number
  kind: 'document' | 'blob'
  id: string
  /** The document's JSON text, or the BLOB's bytes. */
  content: Buffer
}

const cleanups: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
})

function s3Env(s3: TestS3Server, prefix: string): Record<string, string> {
  return {
    COFFER_BLOB_STORE: 's3',
    COFFER_S3_BUCKET: s3.bucket,
    COFFER_S3_ENDPOINT: s3.endpoint,
    COFFER_S3_REGION: s3.region,
    COFFER_S3_ACCESS_KEY_ID: s3.accessKeyId,
    COFFER_S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
    COFFER_S3_FORCE_PATH_STYLE: 'true',
    COFFER_S3_PREFIX: prefix,
  }
}

/** The environment of a node on `db` (its own data folder), BLOBs in S3 when given. */
function nodeEnv(db: SharedDatabase, dir: string, s3?: { server: TestS3Server; prefix: string }) {
  const env = db.env(dir)
  if (!s3) return env
  const { COFFER_BLOB_DIR: _d, COFFER_BLOB_DIR_SHARED: _s, COFFER_BLOB_STORE: _k, ...rest } = env
  return { ...rest, ...s3Env(s3.server, s3.prefix) }
}

async function post(url: string, auth: string, path: string, init: RequestInit) {
  const res = await fetch(`${url}${path}`, {
    ...init,
    method: init.method ?? 'POST',
    headers: { authorization: basicHeader(auth), ...(init.headers ?? {}) },
  })
  return { status: res.status, text: await res.text() }
}

/** Documents and BLOBs written (and read back) until stopped; every answer must succeed. */
function startLoad(url: string, auth: string, vaultId: string) {
  const acked: Acked[] = []
  const failures: string[] = []
  let running = true
  let requests = 0
  const loop = async (worker: number) => {
    for (let i = 0; running; i++) {
      try {
        if (i % 4 === 3) {
          const content = randomBytes(1000 + ((worker * 7919 + i * 104_729) % 150_000))
          const res = await post(url, auth, `/v1/vaults/${vaultId}/blobs`, {
            headers: { 'content-type': 'application/octet-stream' },
            body: content,
          })
          requests += 1
          if (res.status !== 200) failures.push(`BLOB ${res.status} ${res.text}`)
          else
            acked.push({ at: Date.now(), kind: 'blob', id: JSON.parse(res.text).blob_id, content })
          continue
        }
        const document = { worker, i, note: `load-${randomBytes(8).toString('hex')}` }
        const res = await post(url, auth, `/v2/vaults/${vaultId}/documents`, {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ document }),
        })
        requests += 1
        if (res.status !== 200) {
          failures.push(`POST ${res.status} ${res.text}`)
          continue
        }
        const id = JSON.parse(res.text).document_id as string
        acked.push({
          at: Date.now(),
          kind: 'document',
          id,
          content: Buffer.from(JSON.stringify(document)),
        })
        const read = await fetch(`${url}/v2/vaults/${vaultId}/documents/${id}`, {
          headers: { authorization: basicHeader(auth) },
        })
        requests += 1
        if (read.status !== 200) failures.push(`GET ${read.status} ${await read.text()}`)
      } catch (error) {
        failures.push(String(error))
      }
    }
  }
  const workers = [0, 1].map(loop)
  return {
    acked,
    failures,
    requests: () => requests,
    stop: async () => {
      running = false
      await Promise.all(workers)
    },
  }
}

/** What a restored server answers differently from what was acknowledged. */
async function readBack(url: string, auth: string, vaultId: string, acked: Acked[]) {
  const problems: string[] = []
  for (const a of acked) {
    if (a.kind === 'document') {
      const res = await fetch(`${url}/v2/vaults/${vaultId}/documents/${a.id}`, {
        headers: { authorization: basicHeader(auth) },
      })
      const body = (await res.json()) as { documents?: { document: unknown }[] }
      const got = JSON.stringify(body.documents?.[0]?.document)
      if (res.status !== 200 || got !== a.content.toString())
        problems.push(`document ${a.id}: ${res.status} ${got}`)
      continue
    }
    const res = await fetch(`${url}/v1/vaults/${vaultId}/blobs/${a.id}`, {
      headers: { authorization: basicHeader(auth) },
    })
    const bytes = Buffer.from(await res.arrayBuffer())
    if (res.status !== 200 || !bytes.equals(a.content)) problems.push(`blob ${a.id}: ${res.status}`)
  }
  return problems
}

describe.each(['file', 's3'] as const)('coffer backup to a %s', (kind) => {
  it('create under load → verify → restore loses no acknowledged write; a full target is refused', async () => {
    const db = await sharedDatabase()
    cleanups.push(() => db.drop())
    const s3 = kind === 's3' ? await startS3Server() : undefined
    if (s3) cleanups.push(() => s3.close())
    const dataDir = db.dataDir()
    const env = nodeEnv(db, dataDir, s3 && { server: s3, prefix: 'live' })
    const server = await startServerProcess(env)
    cleanups.push(() => server.stop())
    const { api_key: auth } = bootstrapCredentials(dataDir)
    const vault = await post(server.url, auth, '/v1/vaults', {
      body: new URLSearchParams({ name: `vault-${randomBytes(6).toString('hex')}` }),
    })
    expect(vault.status, vault.text).toBe(200)
    const vaultId = JSON.parse(vault.text).vault.id as string

    const load = startLoad(server.url, auth, vaultId)
    while (load.acked.length < 40) await new Promise((r) => setTimeout(r, 50))
    const target = s3
      ? `s3://${s3.bucket}/backups/${randomBytes(4).toString('hex')}.cbk`
      : join(db.dataDir(), 'coffer.cbk')
    const began = Date.now()
    const created = await runCoffer(['backup', 'create', target], env)
    const during = load.acked.filter((a) => a.at > began).length
    await load.stop()
    expect(load.failures).toEqual([])
    expect(during, 'writes acknowledged while create ran').toBeGreaterThan(0)
    const summary = JSON.parse(created.stdout)
    expect(summary.backup).toBe(target)
    expect(summary.tables.documents).toBeGreaterThan(20)
    expect(summary.objects.count).toBeGreaterThan(5)
    if (!s3) {
      expect(existsSync(target)).toBe(true)
      const values = load.acked
        .filter((a) => a.kind === 'document')
        .map((a) => JSON.parse(a.content.toString()).note as string)
      expectNoValuesIn(target, values)
    }

    const verified = await runCoffer(['backup', 'verify', target], env)
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, backup: target })
    await server.stop()

    // A new, empty database and BLOB store with the same master key.
    const restoredDb = await sharedDatabase()
    cleanups.push(() => restoredDb.drop())
    const restoreDir = restoredDb.dataDir()
    const restoreEnv = {
      ...nodeEnv(restoredDb, restoreDir, s3 && { server: s3, prefix: 'restored' }),
      COFFER_MASTER_KEY: db.masterKey.toBase64(),
    }
    const restored = await runCoffer(['backup', 'restore', target], restoreEnv)
    expect(JSON.parse(restored.stdout).tables).toEqual(summary.tables)

    // Restoring again: refused, exit 2, nothing changed.
    // The restored file's key is wrapped by the backup's master key, not restoredDb's own.
    const probe = openCofferStore(
      String(restoredDb.env(restoreDir).COFFER_DATABASE_URL),
      db.masterKey,
    )
    const before = await logicalDump(probe)
    const refused = await cofferFails(['backup', 'restore', target], restoreEnv)
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/not empty.*nothing was changed/)
    expect(await logicalDump(probe)).toBe(before)
    await probe.close()

    const audit = await runCoffer(['audit', 'verify'], restoreEnv)
    expect(JSON.parse(audit.stdout).ok).toBe(true)
    const checked = await runCoffer(['check'], restoreEnv)
    expect(JSON.parse(checked.stdout)).toMatchObject({ ok: true, problems_total: 0 })

    const again = await startServerProcess(restoreEnv)
    cleanups.push(() => again.stop())
    const acknowledged = load.acked.filter((a) => a.at < began)
    expect(acknowledged.length).toBeGreaterThan(30)
    expect(await readBack(again.url, auth, vaultId, acknowledged)).toEqual([])
    await again.stop()
  }, 300_000)
})

describe('scheduled backups in coffer serve', () => {
  it('two nodes on one database: each slot is written once, by one of them; /metrics shows it', async () => {
    const db = await sharedDatabase()
    cleanups.push(() => db.drop())
    const folder = join(db.dataDir(), 'scheduled')
    const token = randomBytes(24).toString('hex')
    const env = (dir: string) => ({
      ...db.env(dir),
      COFFER_BACKUP_SCHEDULE: '* * * * *',
      COFFER_BACKUP_TARGET: folder,
      COFFER_BACKUP_KEEP: '3',
      COFFER_METRICS_TOKEN: token,
    })
    const first = db.dataDir()
    const a = await startServerProcess(env(first))
    cleanups.push(() => a.stop())
    const b = await startServerProcess(env(db.dataDir()))
    cleanups.push(() => b.stop())
    const scrape = async (url: string) => {
      const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
      expect(res.status).toBe(200)
      return res.text()
    }
    const files = () =>
      existsSync(folder) ? readdirSync(folder).filter((n) => n.endsWith('.cbk')) : []
    // The next minute's slot, at the latest.
    const deadline = Date.now() + 90_000
    while (files().length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 500))
    expect(files()).toHaveLength(1)
    await new Promise((r) => setTimeout(r, 2000))
    const [ta, tb] = [await scrape(a.url), await scrape(b.url)]
    const ok = (text: string) =>
      Number(/coffer_backup_runs_total\{outcome="ok"\} (\d+)/.exec(text)?.[1] ?? 'NaN')
    expect(ok(ta) + ok(tb)).toBe(1)
    for (const text of [ta, tb]) {
      expect(text).toMatch(/coffer_backup_failures 0/)
      expect(text).toMatch(/coffer_backup_last_size_bytes [1-9]\d*/)
      expect(text).toMatch(/coffer_backup_last_success_timestamp_seconds \d+/)
    }
    const name = files()[0] as string
    const verified = await runCoffer(['backup', 'verify', join(folder, name)], env(first))
    expect(JSON.parse(verified.stdout).ok).toBe(true)
    await Promise.all([a.stop(), b.stop()])
  }, 240_000)
})

describe('coffer backup verify and restore refuse a damaged file', () => {
  it.skipIf(testDialect === 'postgres')(
    'name the problem and change nothing',
    async () => {
      const db = await sharedDatabase()
      cleanups.push(() => db.drop())
      const dataDir = db.dataDir()
      const env = db.env(dataDir)
      await runCoffer(['account', 'create'], env)
      // The consent secret `coffer serve` generates on SQLite travels with the backup.
      const consentSecret = randomBytes(32).toString('base64url')
      writeFileSync(join(dataDir, 'consent-jwt.key'), `${consentSecret}\n`, { mode: 0o600 })
      const file = join(db.dataDir(), 'one.cbk')
      await runCoffer(['backup', 'create', file], env)
      const bytes = readFileSync(file)
      bytes[bytes.length - 100] = (bytes[bytes.length - 100] as number) ^ 0x80
      const damaged = join(db.dataDir(), 'damaged.cbk')
      writeFileSync(damaged, bytes)
      const verify = await cofferFails(['backup', 'verify', damaged], env)
      expect(verify.code).toBe(2)
      expect(verify.stderr).toMatch(/integrity check in chunk/)
      const restoreDir = db.dataDir()
      const restoreEnv = { COFFER_DATA_DIR: restoreDir, COFFER_MASTER_KEY: db.masterKey.toBase64() }
      const restore = await cofferFails(['backup', 'restore', damaged], restoreEnv)
      expect(restore.code).toBe(2)
      expect(restore.stderr).toMatch(/integrity check in chunk.*nothing was changed/)
      expect(existsSync(join(restoreDir, 'coffer.db'))).toBe(false)

      // Another consent secret where the restore would go: refused, nothing written.
      const elsewhere = db.dataDir()
      const other = `${randomBytes(32).toString('base64url')}\n`
      writeFileSync(join(elsewhere, 'consent-jwt.key'), other)
      const clash = await cofferFails(['backup', 'restore', file], {
        ...restoreEnv,
        COFFER_DATA_DIR: elsewhere,
      })
      expect(clash.code).toBe(2)
      expect(clash.stderr).toMatch(/consent secret/)
      expect(existsSync(join(elsewhere, 'coffer.db'))).toBe(false)

      await runCoffer(['backup', 'restore', file], restoreEnv)
      expect(readFileSync(join(restoreDir, 'consent-jwt.key'), 'utf8').trim()).toBe(consentSecret)
    },
    180_000,
  )
})
