import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { TAG_BYTES } from '../../src/crypto/aead.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { CHUNK_BYTES } from '../../src/crypto/stream-cipher.js'
import { createDeps, type Deps } from '../../src/deps.js'
import type { Store } from '../../src/store/db.js'
import { migrateToLatest } from '../../src/store/migrate.js'
import {
  Api,
  b64,
  basicHeader,
  buildTestApp,
  errorOf,
  TEST_ARGON2,
  type TestApp,
  unb64,
} from '../helpers/app.js'
import { clusterBlobEnv, cofferEnv } from '../helpers/processes.js'
import { openTestSqliteStore, TEST_PG_URL, testDialect } from '../helpers/store.js'

/**
 * Encryption at rest, tested the way HashiCorp Vault tests its barrier
 * (https://developer.hashicorp.com/vault/docs/internals/security): nothing readable in raw storage,
 * every tampered or moved ciphertext fails closed with the DATA_INTEGRITY_FAILURE envelope, BLOB
 * streams never release unauthenticated bytes, and the master key is handled by the command line as
 * the README (Encryption at rest) says.
 */

const SEALED_CHUNK = CHUNK_BYTES + TAG_BYTES
const isPostgres = testDialect === 'postgres'
const tempDirs: string[] = []

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  tempDirs.push(dir)
  return dir
}

afterAll(() => {
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
})

const canary = (label: string) => `canary-${label}-${randomBytes(12).toString('hex')}`

/** A BLOB upload as the SDKs send it: multipart with a binary `file` part. */
function fileUpload(content: Buffer, filename = 'file.bin') {
  const boundary = `----coffer${randomBytes(8).toString('hex')}`
  return {
    payload: Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\n` +
          'Content-Type: application/octet-stream\r\n\r\n',
      ),
      content,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]),
    contentType: `multipart/form-data; boundary=${boundary}`,
  }
}

interface Ctx {
  api: Api
  auth: string
  deps: Deps
}

async function createVault(c: Ctx, name = `v-${randomBytes(4).toString('hex')}`) {
  const res = await c.api.post('/v1/vaults', { auth: c.auth, form: { name } })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().vault.id as string
}

async function createDocument(c: Ctx, vaultId: string, document: unknown): Promise<string> {
  const res = await c.api.post(`/v2/vaults/${vaultId}/documents`, {
    auth: c.auth,
    json: { document },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().document_id as string
}

async function createUserWith(c: Ctx, attributes: unknown): Promise<string> {
  const res = await c.api.post('/v1/users', {
    auth: c.auth,
    form: { username: `u-${randomBytes(6).toString('hex')}`, attributes: b64(attributes) },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().user.id as string
}

async function uploadBlob(c: Ctx, vaultId: string, content: Buffer, filename?: string) {
  const up = fileUpload(content, filename)
  const res = await c.api.app.inject({
    method: 'POST',
    url: `/v1/vaults/${vaultId}/blobs`,
    headers: { authorization: basicHeader(c.auth), 'content-type': up.contentType },
    payload: up.payload,
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json().blob_id as string
}

function downloadBlob(c: Ctx, vaultId: string, blobId: string) {
  return c.api.app.inject({
    method: 'GET',
    url: `/v1/vaults/${vaultId}/blobs/${blobId}`,
    headers: { authorization: basicHeader(c.auth) },
  })
}

/** The 500 envelope of a failed integrity check, and nothing of the stored data. */
function expectIntegrityFailure(
  res: { statusCode: number; body: string; headers: Record<string, unknown> },
  forbidden: string[] = [],
) {
  expect(res.statusCode, res.body).toBe(500)
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/)
  const error = errorOf(res as Parameters<typeof errorOf>[0])
  expect(error).toEqual({
    code: 'DATA_INTEGRITY_FAILURE',
    type: 'api_error',
    message: 'Stored data failed its integrity check and was not served',
  })
  for (const text of forbidden) expect(res.body).not.toContain(text)
}

// ---------------------------------------------------------------------------------------------
// (a) Confidentiality: no canary in raw storage
// ---------------------------------------------------------------------------------------------

/** The canary and its base64 at each of the three byte alignments it can have in a longer text. */
function needles(text: string): Buffer[] {
  const out = [Buffer.from(text)]
  for (let k = 0; k < 3; k++) {
    const full = Buffer.from(`${'x'.repeat(k)}${text}`).toString('base64')
    // drop the groups that also encode neighbouring bytes
    out.push(Buffer.from(full.slice(k === 0 ? 0 : 4, full.length - 4)))
  }
  out.push(Buffer.from(Buffer.from(text).toString('hex')))
  return out
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
}

/** Which needles occur in which files. */
function scan(files: Map<string, Buffer>, secrets: string[]): string[] {
  const hits: string[] = []
  for (const secret of secrets) {
    for (const needle of needles(secret)) {
      for (const [file, bytes] of files) {
        if (bytes.includes(needle)) hits.push(`${secret} (${needle.toString()}) in ${file}`)
      }
    }
  }
  return hits
}

function readAllFiles(dir: string): Map<string, Buffer> {
  return new Map(filesUnder(dir).map((f) => [f, readFileSync(f)]))
}

/**
 * Writes canaries through every path that stores secrets: user attributes (create, update, own
 * attributes), documents (v2 JSON, v1 base64 form, update) and BLOBs (small, multi-chunk, with
 * canaries across a chunk boundary, replaced content). Control strings go where plaintext is
 * expected (usernames, BLOB filenames), to prove the scan can see.
 */
async function writeCanaries(c: Ctx) {
  const secrets: string[] = []
  const controls: string[] = []
  const vaultId = await createVault(c)
  for (let i = 0; i < 20; i++) {
    const s = canary(`attr${i}`)
    secrets.push(s)
    const control = `control-user-${randomBytes(8).toString('hex')}`
    controls.push(control)
    const res = await c.api.post('/v1/users', {
      auth: c.auth,
      form: { username: control, attributes: b64({ ssn: s, n: i }) },
    })
    expect(res.statusCode, res.body).toBe(200)
    if (i % 5 === 0) {
      const s2 = canary(`attr-upd${i}`)
      secrets.push(s2)
      const upd = await c.api.put(`/v1/users/${res.json().user.id}`, {
        auth: c.auth,
        form: { attributes: b64({ updated: s2 }) },
      })
      expect(upd.statusCode, upd.body).toBe(200)
    }
  }
  const own = canary('me')
  secrets.push(own)
  const me = await c.api.put('/v1/auth/me', { auth: c.auth, form: { attributes: b64({ own }) } })
  expect(me.statusCode, me.body).toBe(200)

  for (let i = 0; i < 300; i++) {
    const s = canary(`doc${i}`)
    secrets.push(s)
    if (i % 3 === 0) {
      const res = await c.api.post(`/v1/vaults/${vaultId}/documents`, {
        auth: c.auth,
        form: { document: b64({ secret: s }) },
      })
      expect(res.statusCode, res.body).toBe(200)
    } else {
      const id = await createDocument(c, vaultId, { secret: s, nested: { list: [s, i] } })
      if (i % 10 === 1) {
        const s2 = canary(`doc-upd${i}`)
        secrets.push(s2)
        const upd = await c.api.put(`/v2/vaults/${vaultId}/documents/${id}`, {
          auth: c.auth,
          json: { document: { secret: s2 } },
        })
        expect(upd.statusCode, upd.body).toBe(200)
      }
    }
  }

  for (let i = 0; i < 12; i++) {
    const s = canary(`blob${i}`)
    secrets.push(s)
    const control = `control-file-${randomBytes(8).toString('hex')}.txt`
    controls.push(control)
    // small, one exact chunk, and multi-chunk with the canary across chunk boundaries
    const size = [100, CHUNK_BYTES, 3 * CHUNK_BYTES + 17][i % 3] as number
    const content = Buffer.alloc(size, `${s} `)
    if (size > CHUNK_BYTES) content.write(s, CHUNK_BYTES - 10)
    await uploadBlob(c, vaultId, content, control)
  }
  // the same content twice must not give the same stored bytes (a fresh key per object)
  const same = Buffer.from(canary('blob-twice').repeat(100))
  secrets.push(same.subarray(0, 48).toString())
  const blobA = await uploadBlob(c, vaultId, same)
  const blobB = await uploadBlob(c, vaultId, same)
  // replaced content: the new object is encrypted too
  const replaced = canary('blob-put')
  secrets.push(replaced)
  const up = fileUpload(Buffer.from(replaced.repeat(50)))
  const put = await c.api.app.inject({
    method: 'PUT',
    url: `/v1/vaults/${vaultId}/blobs/${blobA}`,
    headers: { authorization: basicHeader(c.auth), 'content-type': up.contentType },
    payload: up.payload,
  })
  expect(put.statusCode, put.body).toBe(200)
  return { secrets, controls, vaultId, blobA, blobB }
}

/** Every table's rows as text: what `pg_dump` (or `sqlite3 .dump`) would show. */
async function logicalDump(store: Store): Promise<Buffer> {
  const tables =
    store.dialect === 'sqlite'
      ? (
          await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(
            store.db,
          )
        ).rows.map((r) => r.name)
      : (
          await sql<{
            name: string
          }>`select table_name as name from information_schema.tables where table_schema = current_schema()`.execute(
            store.db,
          )
        ).rows.map((r) => r.name)
  expect(tables).toEqual(expect.arrayContaining(['users', 'documents', 'blobs', 'data_keys']))
  const parts: string[] = []
  for (const table of tables) {
    const rows = await sql`select * from ${sql.table(table)}`.execute(store.db)
    parts.push(`${table}: ${JSON.stringify(rows.rows)}`)
  }
  return Buffer.from(parts.join('\n'))
}

describe('confidentiality at rest (R-14a)', () => {
  it.skipIf(isPostgres)(
    'no canary in the SQLite file, its WAL and shm, or any BLOB object file (skipped on PostgreSQL: scans a SQLite file)',
    async () => {
      const dir = tempDir('coffer-scan-')
      const store = openTestSqliteStore(join(dir, 'coffer.db'))
      await migrateToLatest(store.db)
      const masterKey = MasterKey.generate()
      const deps = createDeps(store, {
        masterKey,
        blobStore: new FsBlobStore(join(dir, 'blobs')),
        argon2: TEST_ARGON2,
      })
      const app = await buildApp(deps)
      await app.ready()
      const creds = await deps.accounts.createWithAdmin()
      const c: Ctx = { api: new Api(app), auth: creds.api_key, deps }
      const { secrets, controls } = await writeCanaries(c)

      // while open: the newest pages live in the WAL
      const open = readAllFiles(dir)
      expect([...open.keys()].some((f) => f.endsWith('coffer.db-wal'))).toBe(true)
      const blobFiles = [...open.keys()].filter((f) => f.includes(`${join(dir, 'blobs')}`))
      expect(blobFiles.length).toBe(12 + 2)
      expect(scan(open, secrets)).toEqual([])
      // the scan sees plaintext where the database holds it (usernames, file names) once the
      // rows are read back; in the files, the whole SQLite file is encrypted (issue 22)
      const dump = new Map([['dump', await logicalDump(store)]])
      expect(scan(dump, controls).length).toBeGreaterThanOrEqual(controls.length)
      expect(scan(open, controls)).toEqual([])
      // the master key is never stored anywhere in the data folder
      expect(scan(open, [masterKey.toBase64().slice(0, 40)])).toEqual([])
      // the same content uploaded twice is stored as different bytes
      const objects = blobFiles.map((f) => open.get(f) as Buffer)
      expect(new Set(objects.map((b) => b.toString('hex'))).size).toBe(objects.length)

      await app.close()
      await store.close()
      // after close: the WAL is checkpointed into the main file
      const closed = readAllFiles(dir)
      expect([...closed.keys()].some((f) => f.endsWith('coffer.db'))).toBe(true)
      expect(scan(closed, secrets)).toEqual([])
      expect(scan(closed, controls)).toEqual([])
    },
    120_000,
  )

  describe('logical dump of every table, and the BLOB folder', () => {
    let t: TestApp
    beforeEach(async () => {
      t = await buildTestApp()
    })
    afterEach(async () => t.close())

    it('holds no canary on this database engine', async () => {
      const c: Ctx = { api: t.api, auth: t.admin.api_key, deps: t.deps }
      const { secrets, controls } = await writeCanaries(c)
      const files = readAllFiles((t.deps.blobs as FsBlobStore).root)
      files.set('dump', await logicalDump(t.deps.store))
      expect(scan(files, secrets)).toEqual([])
      expect(scan(files, controls).length).toBeGreaterThanOrEqual(controls.length)
      // and every secret reads back through the API (it was written, not lost)
      const users = await t.api.get('/v1/users', { auth: t.admin.api_key, query: { full: 'true' } })
      expect(users.statusCode).toBe(200)
      const shown = JSON.stringify(
        users.json().users.map((u: { attributes: string }) => unb64(u.attributes)),
      )
      const attributeSecrets = secrets.filter((s) => /^canary-(attr-upd|me-|attr1-)/.test(s))
      expect(attributeSecrets.length).toBe(6)
      for (const s of attributeSecrets) expect(shown).toContain(s)
    }, 120_000)
  })
})

// ---------------------------------------------------------------------------------------------
// (b) Tampered and moved rows fail closed
// ---------------------------------------------------------------------------------------------

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

/** Changes one base64 character of the body, keeping the `c1.<key id>.` prefix. */
function flipBodyChar(text: string, at?: number): string {
  const prefix = /^c1\.[0-9a-f-]{36}\./.exec(text)?.[0]
  if (!prefix) throw new Error(`not a ciphertext: ${text}`)
  const body = text.slice(prefix.length).replace(/=+$/, '')
  const i = at ?? Math.floor(Math.random() * body.length)
  const old = body[i] as string
  const replacement = BASE64[(BASE64.indexOf(old) + 1 + Math.floor(Math.random() * 63)) % 64]
  return prefix + body.slice(0, i) + replacement + text.slice(prefix.length + i + 1)
}

describe('tampered documents and attributes fail closed (R-14b, R-14c)', () => {
  let t: TestApp
  let c: Ctx
  beforeEach(async () => {
    t = await buildTestApp()
    c = { api: t.api, auth: t.admin.api_key, deps: t.deps }
  })
  afterEach(async () => t.close())

  const db = () => t.deps.store.db
  const contentOf = async (id: string) =>
    (
      await db()
        .selectFrom('documents')
        .select('content')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
    ).content
  const setContent = (id: string, content: string) =>
    db().updateTable('documents').set({ content }).where('id', '=', id).execute()
  const attributesOf = async (id: string) =>
    (
      await db()
        .selectFrom('users')
        .select('attributes')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
    ).attributes
  const setAttributes = (id: string, attributes: string) =>
    db().updateTable('users').set({ attributes }).where('id', '=', id).execute()

  const readV2 = (vaultId: string, id: string) =>
    t.api.get(`/v2/vaults/${vaultId}/documents/${id}`, { auth: c.auth })
  const readV1 = (vaultId: string, id: string) =>
    t.api.get(`/v1/vaults/${vaultId}/documents/${id}`, { auth: c.auth })
  const listFull = (vaultId: string) =>
    t.api.get(`/v1/vaults/${vaultId}/documents`, { auth: c.auth, query: { full: 'true' } })

  it('a flipped byte in a document answers 500 DATA_INTEGRITY_FAILURE on v2, v1 and full lists', async () => {
    const vaultId = await createVault(c)
    const secret = canary('doc')
    const good = await createDocument(c, vaultId, { keep: 'me' })
    const id = await createDocument(c, vaultId, { secret })
    expect((await readV2(vaultId, id)).json().documents[0].document).toEqual({ secret })
    expect((await listFull(vaultId)).statusCode).toBe(200)

    await setContent(id, flipBodyChar(await contentOf(id)))
    expectIntegrityFailure(await readV2(vaultId, id), [secret])
    expectIntegrityFailure(await readV1(vaultId, id), [secret])
    // a read of several ids fails as a whole, rather than answering some
    expectIntegrityFailure(await readV2(vaultId, `${good},${id}`), [secret])
    expectIntegrityFailure(await readV1(vaultId, `${good},${id}`), [secret])
    expectIntegrityFailure(await listFull(vaultId), [secret])
    // metadata reads do not decrypt, and the neighbour is untouched
    const list = await t.api.get(`/v1/vaults/${vaultId}/documents`, { auth: c.auth })
    expect(list.statusCode).toBe(200)
    expect(list.json().data.total).toBe(2)
    expect((await readV2(vaultId, good)).json().documents[0].document).toEqual({ keep: 'me' })
    // the schema list route reads the same way
    expect((await readV2(vaultId, good)).statusCode).toBe(200)
  })

  it('100 of 100 randomly damaged documents fail closed, whatever character was changed', async () => {
    const vaultId = await createVault(c)
    const ids: string[] = []
    for (let i = 0; i < 100; i++)
      ids.push(await createDocument(c, vaultId, { i, pad: 'x'.repeat(i) }))
    const printable = `${BASE64}=.-_!~ `
    let failedClosed = 0
    for (const id of ids) {
      const stored = await contentOf(id)
      let tampered: string
      // every third row: any character of the stored text, prefix and padding included
      if (ids.indexOf(id) % 3 === 0) {
        const i = Math.floor(Math.random() * stored.length)
        const choices = [...printable].filter((ch) => ch !== stored[i])
        tampered =
          stored.slice(0, i) +
          (choices[Math.floor(Math.random() * choices.length)] as string) +
          stored.slice(i + 1)
      } else {
        tampered = flipBodyChar(stored)
      }
      await setContent(id, tampered)
      const v2 = await readV2(vaultId, id)
      const v1 = await readV1(vaultId, id)
      if (v2.statusCode === 500 && v1.statusCode === 500) failedClosed++
      expectIntegrityFailure(v2)
      expectIntegrityFailure(v1)
    }
    expect(failedClosed).toBe(100)
  }, 60_000)

  it("document A's ciphertext copied into B's row fails: same vault, across vaults, across accounts", async () => {
    const v1 = await createVault(c)
    const v2 = await createVault(c)
    const secret = canary('moved')
    const a = await createDocument(c, v1, { secret })
    const b = await createDocument(c, v1, { other: 1 })
    const inOtherVault = await createDocument(c, v2, { other: 2 })
    const stolen = await contentOf(a)

    await setContent(b, stolen)
    expectIntegrityFailure(await readV2(v1, b), [secret])
    expectIntegrityFailure(await readV1(v1, b), [secret])
    expectIntegrityFailure(await listFull(v1), [secret])

    await setContent(inOtherVault, stolen)
    expectIntegrityFailure(await readV2(v2, inOtherVault), [secret])
    expectIntegrityFailure(await readV1(v2, inOtherVault), [secret])
    expectIntegrityFailure(await listFull(v2), [secret])

    // another account's row
    const other = await t.newAccount()
    const o: Ctx = { api: t.api, auth: other.api_key, deps: t.deps }
    const ov = await createVault(o)
    const od = await createDocument(o, ov, { theirs: true })
    await setContent(od, stolen)
    expectIntegrityFailure(
      await t.api.get(`/v2/vaults/${ov}/documents/${od}`, { auth: other.api_key }),
      [secret],
    )
    // the same id in a re-created row elsewhere does not help either: a document moved whole
    // (content and id) into another vault is still bound to its original vault
    await db().deleteFrom('documents').where('id', '=', inOtherVault).execute()
    await db().updateTable('documents').set({ vault_id: v2 }).where('id', '=', a).execute()
    expectIntegrityFailure(await readV2(v2, a), [secret])
    // the original stays readable where it belongs
    await db().updateTable('documents').set({ vault_id: v1 }).where('id', '=', a).execute()
    expect((await readV2(v1, a)).json().documents[0].document).toEqual({ secret })
  })

  it('a ciphertext naming a data key of another account, or an unknown one, fails closed', async () => {
    const vaultId = await createVault(c)
    const id = await createDocument(c, vaultId, { mine: true })
    const other = await t.newAccount()
    const theirKey = await db()
      .selectFrom('data_keys')
      .select('id')
      .where('account_id', '=', other.account_id)
      .executeTakeFirstOrThrow()
    const stored = await contentOf(id)
    await setContent(id, stored.replace(/^c1\.[^.]+\./, `c1.${theirKey.id}.`))
    expectIntegrityFailure(await readV2(vaultId, id))
    await setContent(id, stored.replace(/^c1\.[^.]+\./, 'c1.00000000-0000-7000-8000-000000000000.'))
    expectIntegrityFailure(await readV2(vaultId, id))
    // plaintext JSON in the column is never served as such
    await setContent(id, '{"mine":true}')
    expectIntegrityFailure(await readV2(vaultId, id))
    expectIntegrityFailure(await readV1(vaultId, id))
  })

  it('tampered or moved user attributes fail closed on every full read', async () => {
    const secret = canary('attr')
    const a = await createUserWith(c, { secret })
    const b = await createUserWith(c, { b: true })
    const full = { full: 'true' }
    const ok = await t.api.get(`/v1/users/${a}`, { auth: c.auth, query: full })
    expect(unb64(ok.json().user.attributes)).toEqual({ secret })

    const original = await attributesOf(a)
    await setAttributes(a, flipBodyChar(original))
    expectIntegrityFailure(await t.api.get(`/v1/users/${a}`, { auth: c.auth, query: full }), [
      secret,
    ])
    expectIntegrityFailure(await t.api.get(`/v2/users/${a}`, { auth: c.auth, query: full }), [
      secret,
    ])
    expectIntegrityFailure(await t.api.get('/v1/users', { auth: c.auth, query: full }), [secret])
    // without full, nothing is decrypted: the user's metadata still reads
    expect((await t.api.get(`/v1/users/${a}`, { auth: c.auth })).statusCode).toBe(200)

    // A's (intact) attributes copied into B's row: bound to A's id
    await setAttributes(a, original)
    await setAttributes(b, original)
    expectIntegrityFailure(await t.api.get(`/v1/users/${b}`, { auth: c.auth, query: full }), [
      secret,
    ])
    expectIntegrityFailure(await t.api.get(`/v2/users/${b}`, { auth: c.auth, query: full }), [
      secret,
    ])
    expect(
      unb64(
        (await t.api.get(`/v1/users/${a}`, { auth: c.auth, query: full })).json().user.attributes,
      ),
    ).toEqual({ secret })
  })

  it("a user's own full read (/v1/auth/me?full=true) fails closed on tampered attributes", async () => {
    const secret = canary('me')
    const put = await t.api.put('/v1/auth/me', {
      auth: c.auth,
      form: { attributes: b64({ secret }) },
    })
    expect(put.statusCode, put.body).toBe(200)
    await setAttributes(t.admin.userId, flipBodyChar(await attributesOf(t.admin.userId)))
    expectIntegrityFailure(
      await t.api.get('/v1/auth/me', { auth: c.auth, query: { full: 'true' } }),
      [secret],
    )
  })
})

// ---------------------------------------------------------------------------------------------
// (c) BLOB objects
// ---------------------------------------------------------------------------------------------

describe('tampered BLOB objects fail closed (R-14b, R-14c)', () => {
  let t: TestApp
  let c: Ctx
  let base: string
  beforeEach(async () => {
    t = await buildTestApp()
    c = { api: t.api, auth: t.admin.api_key, deps: t.deps }
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    const address = t.app.server.address()
    if (!address || typeof address === 'string') throw new Error('no port')
    base = `http://127.0.0.1:${address.port}`
  })
  afterEach(async () => t.close())

  const objectFile = async (blobId: string) => {
    const row = await t.deps.store.db
      .selectFrom('blobs')
      .select('object_key')
      .where('id', '=', blobId)
      .executeTakeFirstOrThrow()
    return (t.deps.blobs as FsBlobStore).pathFor(row.object_key)
  }
  const flipByte = (file: string, at: number) => {
    const bytes = readFileSync(file)
    bytes[at] = (bytes[at] as number) ^ 0x20
    writeFileSync(file, bytes)
  }

  /** Reads a response body until it ends or fails; keeps what arrived. */
  async function readBody(res: Response): Promise<{ bytes: Buffer; error: unknown }> {
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const parts: Buffer[] = []
    let error: unknown
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        parts.push(Buffer.from(value))
      }
    } catch (e) {
      error = e
    }
    return { bytes: Buffer.concat(parts), error }
  }

  const get = (vaultId: string, blobId: string) =>
    fetch(`${base}/v1/vaults/${vaultId}/blobs/${blobId}`, {
      headers: { authorization: basicHeader(c.auth) },
    })

  it('a flipped byte in the first chunk answers the 500 envelope before any header', async () => {
    const vaultId = await createVault(c)
    for (const size of [1, 1000, CHUNK_BYTES, 3 * CHUNK_BYTES + 5]) {
      const content = randomBytes(size)
      const blobId = await uploadBlob(c, vaultId, content, 'secret.bin')
      const intact = await downloadBlob(c, vaultId, blobId)
      expect(intact.statusCode).toBe(200)
      expect(intact.rawPayload.equals(content)).toBe(true)
      const file = await objectFile(blobId)
      // first byte, a middle byte and the first chunk's tag
      for (const at of [0, Math.min(size, CHUNK_BYTES) >> 1, Math.min(size, CHUNK_BYTES) + 3]) {
        flipByte(file, at)
        const res = await downloadBlob(c, vaultId, blobId)
        expectIntegrityFailure(res)
        expect(res.headers['content-disposition']).toBeUndefined()
        if (size >= 16) expect(res.rawPayload.includes(content.subarray(0, 16))).toBe(false)
        // over a real socket too
        const real = await get(vaultId, blobId)
        expect(real.status).toBe(500)
        expect(((await real.json()) as { error: { code: string } }).error.code).toBe(
          'DATA_INTEGRITY_FAILURE',
        )
        flipByte(file, at) // restore
      }
      expect((await downloadBlob(c, vaultId, blobId)).rawPayload.equals(content)).toBe(true)
    }
  })

  it('a flipped byte in a later chunk ends the download early, releasing only authenticated chunks', async () => {
    const vaultId = await createVault(c)
    const content = randomBytes(4 * CHUNK_BYTES + 1234)
    const blobId = await uploadBlob(c, vaultId, content)
    const file = await objectFile(blobId)
    expect(statSync(file).size).toBe(content.length + 5 * TAG_BYTES)
    for (const chunk of [1, 2, 4]) {
      const at = chunk * SEALED_CHUNK + 77
      flipByte(file, at)
      const res = await get(vaultId, blobId)
      // While the answer waits for its audit event to be stored (issue 13), the decrypting
      // stream reads ahead: a damage close enough to the start may be found before any header
      // is sent, and then the answer is the 500 envelope with no content (still only
      // authenticated chunks: none).
      if (res.status === 500) {
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
          'DATA_INTEGRITY_FAILURE',
        )
        flipByte(file, at)
        continue
      }
      // the first chunk decrypted, so the headers went out as a success …
      expect(res.status).toBe(200)
      expect(res.headers.get('content-length')).toBe(String(content.length))
      const { bytes, error } = await readBody(res)
      // … but the body never completes
      expect(error !== undefined || bytes.length < content.length).toBe(true)
      expect(bytes.length).toBeLessThan(content.length)
      // and what did arrive is genuine content, from the chunks before the damaged one
      expect(bytes.length).toBeLessThanOrEqual(chunk * CHUNK_BYTES)
      expect(bytes.equals(content.subarray(0, bytes.length))).toBe(true)
      flipByte(file, at)
    }
    // the server is fine afterwards, and the restored object reads whole
    const again = await get(vaultId, blobId)
    const whole = await readBody(again)
    expect(whole.error).toBeUndefined()
    expect(whole.bytes.equals(content)).toBe(true)
  })

  it.skipIf(!existsSync('/proc/self/fd'))(
    'failed downloads release the object file at once (no descriptor left for the GC)',
    async () => {
      const vaultId = await createVault(c)
      const blobId = await uploadBlob(c, vaultId, randomBytes(3 * CHUNK_BYTES))
      const file = await objectFile(blobId)
      const openFds = () => readdirSync('/proc/self/fd').length
      flipByte(file, 5)
      const before = openFds()
      for (let i = 0; i < 30; i++) expectIntegrityFailure(await downloadBlob(c, vaultId, blobId))
      flipByte(file, 5)
      flipByte(file, SEALED_CHUNK + 5)
      for (let i = 0; i < 10; i++) await readBody(await get(vaultId, blobId))
      await new Promise((r) => setTimeout(r, 100))
      expect(openFds() - before).toBeLessThan(5)
    },
  )

  it('a truncated object (last chunk cut, or whole chunks dropped) never completes', async () => {
    const vaultId = await createVault(c)
    const content = randomBytes(3 * CHUNK_BYTES + 500)
    const blobId = await uploadBlob(c, vaultId, content)
    const file = await objectFile(blobId)
    const original = readFileSync(file)
    for (const cut of [original.length - 1, 3 * SEALED_CHUNK, 2 * SEALED_CHUNK + 10]) {
      writeFileSync(file, original.subarray(0, cut))
      const res = await get(vaultId, blobId)
      if (res.status === 500) continue
      const { bytes, error } = await readBody(res)
      expect(error !== undefined || bytes.length < content.length).toBe(true)
      expect(bytes.equals(content.subarray(0, bytes.length))).toBe(true)
    }
    // a middle chunk dropped
    writeFileSync(
      file,
      Buffer.concat([original.subarray(0, SEALED_CHUNK), original.subarray(2 * SEALED_CHUNK)]),
    )
    const res = await get(vaultId, blobId)
    if (res.status !== 500) {
      const { bytes, error } = await readBody(res)
      expect(error !== undefined || bytes.length < content.length).toBe(true)
      expect(bytes.length).toBeLessThanOrEqual(CHUNK_BYTES)
    }
  })

  it("one BLOB's object file copied over another's fails: each key is bound to its object", async () => {
    const vaultId = await createVault(c)
    const otherVault = await createVault(c)
    const secret = Buffer.from(canary('blob').repeat(40))
    const a = await uploadBlob(c, vaultId, secret)
    const b = await uploadBlob(c, vaultId, randomBytes(secret.length))
    const elsewhere = await uploadBlob(c, otherVault, randomBytes(secret.length))
    copyFileSync(await objectFile(a), await objectFile(b))
    copyFileSync(await objectFile(a), await objectFile(elsewhere))
    expectIntegrityFailure(await downloadBlob(c, vaultId, b), [secret.subarray(0, 30).toString()])
    expectIntegrityFailure(await downloadBlob(c, otherVault, elsewhere), [
      secret.subarray(0, 30).toString(),
    ])
    expect((await downloadBlob(c, vaultId, a)).rawPayload.equals(secret)).toBe(true)
  })

  it("A's wrapped stream key, or A's whole row pointer, copied into B's row fails", async () => {
    const vaultId = await createVault(c)
    const secret = Buffer.from(canary('blobkey').repeat(40))
    const a = await uploadBlob(c, vaultId, secret)
    const b = await uploadBlob(c, vaultId, randomBytes(100))
    const db = t.deps.store.db
    const rowA = await db
      .selectFrom('blobs')
      .select(['content_key', 'object_key', 'size'])
      .where('id', '=', a)
      .executeTakeFirstOrThrow()
    // key only: it is bound to A's id and object
    await db
      .updateTable('blobs')
      .set({ content_key: rowA.content_key })
      .where('id', '=', b)
      .execute()
    expectIntegrityFailure(await downloadBlob(c, vaultId, b))
    // key and object pointer together: still bound to A's id
    await db
      .updateTable('blobs')
      .set({ content_key: rowA.content_key, object_key: rowA.object_key, size: rowA.size })
      .where('id', '=', b)
      .execute()
    expectIntegrityFailure(await downloadBlob(c, vaultId, b), [secret.subarray(0, 30).toString()])
    // a flipped character in the wrapped stream key
    await db
      .updateTable('blobs')
      .set({ content_key: flipBodyChar(rowA.content_key) })
      .where('id', '=', a)
      .execute()
    expectIntegrityFailure(await downloadBlob(c, vaultId, a), [secret.subarray(0, 30).toString()])
  })
})

// ---------------------------------------------------------------------------------------------
// (e) Attributes stored in plaintext by an older version
// ---------------------------------------------------------------------------------------------

describe('plaintext attributes from an older version', () => {
  let t: TestApp
  beforeEach(async () => {
    t = await buildTestApp()
  })
  afterEach(async () => t.close())

  it('are never served as such, and encryptPlaintextAttributes seals them once', async () => {
    const c: Ctx = { api: t.api, auth: t.admin.api_key, deps: t.deps }
    const id = await createUserWith(c, { new: true })
    const db = t.deps.store.db
    await db
      .updateTable('users')
      .set({ attributes: '{"legacy":true}' })
      .where('id', '=', id)
      .execute()
    expectIntegrityFailure(
      await t.api.get(`/v1/users/${id}`, { auth: c.auth, query: { full: 'true' } }),
    )

    expect(await t.deps.users.encryptPlaintextAttributes()).toBe(1)
    const stored = await db
      .selectFrom('users')
      .select('attributes')
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    expect(stored.attributes.startsWith('c1.')).toBe(true)
    expect(stored.attributes).not.toContain('legacy')
    const v1 = await t.api.get(`/v1/users/${id}`, { auth: c.auth, query: { full: 'true' } })
    expect(v1.statusCode, v1.body).toBe(200)
    expect(unb64(v1.json().user.attributes)).toEqual({ legacy: true })
    const v2 = await t.api.get(`/v2/users/${id}`, { auth: c.auth, query: { full: 'true' } })
    expect(v2.json().users[0].attributes).toEqual({ legacy: true })
    // nothing left to do; every other user was encrypted from the start
    expect(await t.deps.users.encryptPlaintextAttributes()).toBe(0)
    const all = await db.selectFrom('users').select('attributes').execute()
    expect(all.every((u) => u.attributes.startsWith('c1.'))).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------
// (d) Master key handling by the command line
// ---------------------------------------------------------------------------------------------

const MAIN = ['--import', 'tsx', 'src/main.ts']

/** The main API only: the consent listener would want port 8081 (taken by a parallel test) and,
 * on PostgreSQL, a consent secret, neither of which these tests are about. */
const cliEnv = (extra: Record<string, string>) => cofferEnv({ COFFER_SERVE: 'api', ...extra })

interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs a command to its end (killed after 30 s: a command that should refuse must not serve). */
function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...MAIN, ...args],
      { env: cliEnv(env), timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0
        resolve({ code, stdout, stderr })
      },
    )
  })
}

/** Starts `coffer serve` and resolves with its port once it listens. */
function serve(env: Record<string, string>) {
  const child = spawn(process.execPath, [...MAIN, 'serve'], {
    env: cliEnv({ COFFER_PORT: '0', ...env }),
  })
  let out = ''
  return new Promise<{ child: ChildProcess; port: number; output: () => string }>(
    (resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 30_000)
      const onData = (chunk: Buffer) => {
        out += chunk.toString()
        const m = /listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(out)
        if (m) {
          clearTimeout(timer)
          resolve({ child, port: Number(m[1]), output: () => out })
        }
      }
      child.stdout.on('data', onData)
      child.stderr.on('data', onData)
      child.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`server exited (${code}): ${out}`))
      })
    },
  )
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const done = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  await done
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const address = server.address()
  await new Promise((r) => server.close(r))
  if (!address || typeof address === 'string') throw new Error('no port')
  return address.port
}

/** A started server must refuse: non-zero exit, the reason on stderr, nothing listening. */
async function expectRefusesToServe(env: Record<string, string>, reason: RegExp) {
  const port = await freePort()
  const result = await cli(['serve'], { ...env, COFFER_PORT: String(port) })
  expect(result.code, result.stderr).toBe(1)
  expect(result.stderr).toMatch(reason)
  expect(result.stdout + result.stderr).not.toMatch(/listening at/)
  await expect(fetch(`http://127.0.0.1:${port}/v1/auth/me`)).rejects.toThrow()
  return result
}

const auth = (key: string) => ({ authorization: basicHeader(key) })

describe.skipIf(isPostgres)(
  'master key on the command line (skipped on PostgreSQL: the CLI runs on its embedded SQLite default)',
  () => {
    it('generates master.key once, rotates it, keeps old data readable, refuses other keys', async () => {
      const dir = tempDir('coffer-keys-')
      const keyFile = join(dir, 'master.key')
      const env = { COFFER_DATA_DIR: dir }
      const outputs: string[] = []

      // first command: the key is generated into the data folder, readable by this user only
      const created = await cli(['account', 'create'], env)
      outputs.push(created.stdout, created.stderr)
      expect(created.code, created.stderr).toBe(0)
      const creds = JSON.parse(created.stdout)
      expect(existsSync(keyFile)).toBe(true)
      expect(statSync(keyFile).mode & 0o777).toBe(0o600)
      const firstKey = MasterKey.fromBase64(readFileSync(keyFile, 'utf8'))
      expect(created.stderr).toContain(firstKey.id)

      // data written before the rotation: a document and user attributes, over HTTP
      const secret = canary('rotate')
      const first = await serve(env)
      const url = `http://127.0.0.1:${first.port}`
      const vault = await fetch(`${url}/v1/vaults`, {
        method: 'POST',
        headers: auth(creds.api_key),
        body: new URLSearchParams({ name: 'rotation' }),
      })
      const vaultId = ((await vault.json()) as { vault: { id: string } }).vault.id
      const doc = await fetch(`${url}/v2/vaults/${vaultId}/documents`, {
        method: 'POST',
        headers: { ...auth(creds.api_key), 'content-type': 'application/json' },
        body: JSON.stringify({ document: { secret } }),
      })
      expect(doc.status).toBe(200)
      const docId = ((await doc.json()) as { document_id: string }).document_id
      const user = await fetch(`${url}/v1/users`, {
        method: 'POST',
        headers: auth(creds.api_key),
        body: new URLSearchParams({ username: 'rotated', attributes: b64({ secret }) }),
      })
      expect(user.status).toBe(200)
      const userId = ((await user.json()) as { user: { id: string } }).user.id
      await stop(first.child)
      outputs.push(first.output())

      // rotate: a new key in master.key, the data keys re-wrapped
      const rotated = await cli(['keys', 'rotate'], env)
      outputs.push(rotated.stdout, rotated.stderr)
      expect(rotated.code, rotated.stderr).toBe(0)
      const report = JSON.parse(rotated.stdout)
      const secondKey = MasterKey.fromBase64(readFileSync(keyFile, 'utf8'))
      expect(report).toMatchObject({
        rotated_data_keys: 1,
        master_key_id: secondKey.id,
        key_file: keyFile,
        not_under_current: 0,
        previous_may_be_retired: true,
      })
      expect(secondKey.id).not.toBe(firstKey.id)
      expect(statSync(keyFile).mode & 0o777).toBe(0o600)
      expect(readdirSync(dir).filter((f) => f.startsWith('master.key'))).toEqual(['master.key'])

      // old data reads under the new key
      const second = await serve(env)
      const url2 = `http://127.0.0.1:${second.port}`
      const read = await fetch(`${url2}/v2/vaults/${vaultId}/documents/${docId}`, {
        headers: auth(creds.api_key),
      })
      expect(read.status).toBe(200)
      expect(
        ((await read.json()) as { documents: { document: unknown }[] }).documents[0],
      ).toMatchObject({ document: { secret } })
      const attrs = await fetch(`${url2}/v2/users/${userId}?full=true`, {
        headers: auth(creds.api_key),
      })
      expect(
        ((await attrs.json()) as { users: { attributes: unknown }[] }).users[0]?.attributes,
      ).toEqual({
        secret,
      })
      await stop(second.child)
      outputs.push(second.output())

      // the old key, or any other, does not unlock the database: refused before serving
      for (const other of [firstKey, MasterKey.generate()]) {
        const refused = await expectRefusesToServe(
          { ...env, COFFER_MASTER_KEY: other.toBase64() },
          /does not unlock this database/,
        )
        outputs.push(refused.stdout, refused.stderr)
        const create = await cli(['account', 'create'], {
          ...env,
          COFFER_MASTER_KEY: other.toBase64(),
        })
        expect(create.code).toBe(1)
        expect(create.stdout).toBe('')
        expect(create.stderr).toMatch(/does not unlock this database/)
      }

      // master.key gone while data keys exist: refused, and no new key is generated
      renameSync(keyFile, `${keyFile}.moved`)
      const missing = await expectRefusesToServe(env, /no master key/)
      outputs.push(missing.stderr)
      expect(missing.stderr).toContain(secondKey.id)
      expect(existsSync(keyFile)).toBe(false)
      const rotateMissing = await cli(['keys', 'rotate'], env)
      expect(rotateMissing.code).toBe(1)
      expect(existsSync(keyFile)).toBe(false)
      renameSync(`${keyFile}.moved`, keyFile)

      // no key ever reaches an output
      for (const key of [firstKey, secondKey]) {
        for (const text of outputs) expect(text).not.toContain(key.toBase64().slice(0, 40))
      }
      // nor the database
      const dbBytes = readAllFiles(dir)
      dbBytes.delete(keyFile)
      expect(
        scan(dbBytes, [
          firstKey.toBase64().slice(0, 40),
          secondKey.toBase64().slice(0, 40),
          secret,
        ]),
      ).toEqual([])
    }, 180_000)
  },
)

/**
 * On PostgreSQL the same commands run against a fresh schema (COFFER_DATABASE_URL with a
 * search_path), where the key must come from the environment: nodes share one database.
 */
async function commandDatabase(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  if (!isPostgres) return { env: {}, drop: async () => {} }
  const schema = `coffer_cli_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: TEST_PG_URL })
  await admin.connect()
  await admin.query(`create schema ${schema}`)
  await admin.end()
  const url = new URL(TEST_PG_URL)
  url.searchParams.set('options', `-c search_path=${schema}`)
  // `serve` on PostgreSQL needs a BLOB folder declared shared (issue 12, point 7).
  const blobs = mkdtempSync(join(tmpdir(), 'coffer-cli-blobs-'))
  return {
    env: { COFFER_DATABASE_URL: url.toString(), ...clusterBlobEnv(blobs) },
    drop: async () => {
      rmSync(blobs, { recursive: true, force: true })
      const c = new pg.Client({ connectionString: TEST_PG_URL })
      await c.connect()
      await c.query(`drop schema if exists ${schema} cascade`)
      await c.end()
    },
  }
}

describe(`master key from the environment (${testDialect})`, () => {
  it.runIf(isPostgres)(
    'PostgreSQL never generates a key file: without COFFER_MASTER_KEY nothing starts',
    async () => {
      const database = await commandDatabase()
      try {
        const dir = tempDir('coffer-pgkey-')
        const result = await cli(['account', 'create'], { COFFER_DATA_DIR: dir, ...database.env })
        expect(result.code).toBe(1)
        expect(result.stdout).toBe('')
        expect(result.stderr).toMatch(/COFFER_MASTER_KEY .*is required with PostgreSQL/)
        expect(existsSync(join(dir, 'master.key'))).toBe(false)
      } finally {
        await database.drop()
      }
    },
    60_000,
  )

  it('with COFFER_MASTER_KEY, rotation needs COFFER_NEW_MASTER_KEY; afterwards only the new key unlocks', async () => {
    const database = await commandDatabase()
    try {
      const dir = tempDir('coffer-envkey-')
      const oldKey = MasterKey.generate()
      const newKey = MasterKey.generate()
      const withOld = {
        COFFER_DATA_DIR: dir,
        COFFER_MASTER_KEY: oldKey.toBase64(),
        ...database.env,
      }
      const withNew = {
        COFFER_DATA_DIR: dir,
        COFFER_MASTER_KEY: newKey.toBase64(),
        ...database.env,
      }

      const created = await cli(['account', 'create'], withOld)
      expect(created.code, created.stderr).toBe(0)
      const creds = JSON.parse(created.stdout)
      // a key given in the environment is never written to disk
      expect(existsSync(join(dir, 'master.key'))).toBe(false)

      const refused = await cli(['keys', 'rotate'], withOld)
      expect(refused.code).toBe(1)
      expect(refused.stderr).toMatch(/COFFER_MASTER_KEY_PREVIOUS.*COFFER_NEW_MASTER_KEY/)
      expect(refused.stdout).toBe('')
      // a wrong current key cannot rotate anything
      const wrongCurrent = await cli(['keys', 'rotate'], {
        ...withNew,
        COFFER_NEW_MASTER_KEY: MasterKey.generate().toBase64(),
      })
      expect(wrongCurrent.code).toBe(1)
      expect(wrongCurrent.stderr).toContain(oldKey.id)
      // nothing changed: the old key still works (a second account, a second data key)
      const again = await cli(['account', 'create'], withOld)
      expect(again.code, again.stderr).toBe(0)

      const rotated = await cli(['keys', 'rotate'], {
        ...withOld,
        COFFER_NEW_MASTER_KEY: newKey.toBase64(),
      })
      expect(rotated.code, rotated.stderr).toBe(0)
      expect(JSON.parse(rotated.stdout)).toMatchObject({
        rotated_data_keys: 2,
        master_key_id: newKey.id,
        mode: 'new-master-key',
        previous_may_be_retired: true,
      })
      expect(existsSync(join(dir, 'master.key'))).toBe(false)
      for (const out of [rotated.stdout, rotated.stderr, refused.stderr, wrongCurrent.stderr]) {
        expect(out).not.toContain(oldKey.toBase64().slice(0, 40))
        expect(out).not.toContain(newKey.toBase64().slice(0, 40))
      }

      await expectRefusesToServe(withOld, /does not unlock this database/)
      const old = await cli(['account', 'create'], withOld)
      expect(old.code).toBe(1)
      expect(old.stderr).toMatch(/does not unlock this database/)

      // the new key serves the data written under the old one
      const server = await serve(withNew)
      const res = await fetch(`http://127.0.0.1:${server.port}/v1/users?full=true`, {
        headers: auth(creds.api_key),
      })
      expect(res.status).toBe(200)
      const users = ((await res.json()) as { users: { attributes: string }[] }).users
      expect(users.map((u) => unb64(u.attributes))).toEqual([{}])
      await stop(server.child)
      expect(server.output()).not.toContain(newKey.toBase64().slice(0, 40))
    } finally {
      await database.drop()
    }
  }, 180_000)
})
