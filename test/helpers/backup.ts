import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import pg from 'pg'
import { expect } from 'vitest'
import type { BlobStore } from '../../src/blob/blob-store.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import type { MasterKeySet } from '../../src/crypto/master-key-set.js'
import { createDeps } from '../../src/deps.js'
import type { RestoreTarget } from '../../src/modules/backup/backup-restore.js'
import type { Scratch } from '../../src/modules/backup/backup-verify.js'
import { type CheckReport, runCheck } from '../../src/modules/backup/check.js'
import { scratchFor, withSearchPath } from '../../src/modules/backup/scratch.js'
import { sealedRecordColumns } from '../../src/modules/keys/reencrypt.js'
import { openStore, type Store } from '../../src/store/db.js'
import { migrateTo } from '../../src/store/migrate.js'
import { type Api, b64 } from './app.js'
import { openTestSqliteStore, TEST_PG_URL } from './store.js'

/** A second store on the same database as `store` (a backup's snapshot runs on its own). */
export async function secondStore(store: Store, sqliteFile: string | undefined): Promise<Store> {
  if (store.dialect === 'sqlite') {
    if (!sqliteFile) throw new Error('a second SQLite connection needs the file')
    return openTestSqliteStore(sqliteFile, { sqliteReadWorkers: 0 })
  }
  return openStore({ url: TEST_PG_URL, pgSchema: await currentSchema(store), pg: { poolSize: 2 } })
}

export async function currentSchema(store: Store): Promise<string> {
  const rows = await sql<{ s: string }>`select current_schema() as s`.execute(store.db)
  return rows.rows[0]?.s as string
}

/** An empty, unmigrated restore target of the same engine, and how to drop it. */
export async function emptyTarget(
  dialect: 'sqlite' | 'postgres',
): Promise<RestoreTarget & { close(): Promise<void>; file?: string; blobDir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-restore-'))
  const blobDir = join(dir, 'blobs')
  const blobStore = new FsBlobStore(blobDir)
  let store: Store
  let drop = async () => {}
  let file: string | undefined
  if (dialect === 'sqlite') {
    file = join(dir, 'restored.db')
    store = openStore({ url: file, sqliteReadWorkers: 0 })
  } else {
    const schema = `coffer_restore_${randomBytes(6).toString('hex')}`
    const admin = new pg.Client({ connectionString: TEST_PG_URL })
    await admin.connect()
    await admin.query(`create schema ${schema}`)
    await admin.end()
    store = openStore({ url: TEST_PG_URL, pgSchema: schema, pg: { poolSize: 3 } })
    drop = async () => {
      const c = new pg.Client({ connectionString: TEST_PG_URL })
      await c.connect()
      await c.query(`drop schema if exists ${schema} cascade`)
      await c.end()
    }
  }
  return {
    store,
    blobStore,
    blobDir,
    ...(file ? { file } : {}),
    migrateTo: async (name) => {
      await migrateTo(store.db, name)
    },
    close: async () => {
      await store.close()
      await drop()
    },
  }
}

/** `coffer check` over a store and BLOB store, composed as main.ts composes it. */
export function checkOf(store: Store, blobStore: BlobStore, keys: MasterKeySet) {
  const deps = createDeps(store, { masterKey: keys, blobStore, audit: false })
  return runCheck({
    db: store.db,
    keyring: deps.keyring,
    columns: sealedRecordColumns(deps),
    blobs: deps.blobService.sealedColumn(),
    blobStore,
    blobObjectKey: (a, v, b) => deps.blobService.objectKeyOf(a, v, b),
    pause: async () => {},
  })
}

/**
 * Scratch locations for verify in tests (the system temp folder, the test PostgreSQL), given the
 * URL a node of `admin`'s database has: its schema named in the URL, as the CLI gets it.
 */
export function testScratch(
  admin: Store,
): (meta: { database: 'sqlite' | 'postgres' }) => Promise<Scratch> {
  return async (meta) => {
    const url =
      admin.dialect === 'postgres'
        ? withSearchPath(TEST_PG_URL, await currentSchema(admin))
        : TEST_PG_URL
    return scratchFor(meta.database, tmpdir(), { admin: admin.db, options: { url } })
  }
}

export function verifyCheck(keys: MasterKeySet): (s: Scratch) => Promise<CheckReport> {
  return (s) => checkOf(s.store, s.blobStore, keys)
}

/** Every way a value could show up in a file: UTF-8, UTF-16, hex, base64 (and base64url). */
export function encodingsOf(value: string): Buffer[] {
  const utf8 = Buffer.from(value, 'utf8')
  return [
    utf8,
    Buffer.from(value, 'utf16le'),
    Buffer.from(value, 'utf16le').swap16(),
    Buffer.from(utf8.toString('hex')),
    Buffer.from(utf8.toString('hex').toUpperCase()),
    // Any of the three alignments a value can take inside a longer base64 text.
    ...[0, 1, 2].map((shift) => {
      const text = Buffer.concat([Buffer.alloc(shift), utf8]).toString('base64')
      // The characters that depend only on the value's own bytes.
      const from = Math.ceil((shift * 4) / 3) + 4
      return Buffer.from(text.slice(from, text.length - 4))
    }),
  ]
}

export function expectNoValuesIn(file: string, values: string[]): void {
  const bytes = readFileSync(file)
  for (const value of values) {
    for (const encoded of encodingsOf(value)) {
      expect(bytes.includes(encoded), `${value} found in ${file}`).toBe(false)
    }
  }
}

export interface Seeded {
  /** Plaintext values written through the API (none may appear in a backup file). */
  values: string[]
  vaultId: string
  documents: { id: string; content: unknown }[]
  blobs: { id: string; content: Buffer }[]
}

const canary = (label: string) => `canary-${label}-${randomBytes(10).toString('hex')}`

/** A bit of everything through the API: vault, schema, documents, users, groups, BLOBs, a SAT. */
export async function seed(api: Api, auth: string): Promise<Seeded> {
  const values: string[] = []
  const v = (label: string) => {
    const value = canary(label)
    values.push(value)
    return value
  }
  const vault = await api.post('/v1/vaults', { auth, form: { name: v('vault') } })
  expect(vault.statusCode, vault.body).toBe(200)
  const vaultId = vault.json().vault.id as string
  const schema = await api.post(`/v1/vaults/${vaultId}/schemas`, {
    auth,
    form: {
      schema: b64({
        name: v('schema'),
        fields: [{ name: 'name', type: 'string', index: true }],
      }),
    },
  })
  expect(schema.statusCode, schema.body).toBe(200)
  const documents: Seeded['documents'] = []
  for (let i = 0; i < 30; i++) {
    const content = { name: v('indexed'), note: v('note'), n: i, f: i / 7 }
    const res = await api.post(`/v2/vaults/${vaultId}/documents`, {
      auth,
      json: { document: content, schema_id: schema.json().schema.id },
    })
    expect(res.statusCode, res.body).toBe(200)
    documents.push({ id: res.json().document_id, content })
  }
  for (let i = 0; i < 3; i++) {
    const res = await api.post('/v1/users', {
      auth,
      form: { username: v('user'), password: v('password'), attributes: b64({ mail: v('attr') }) },
    })
    expect(res.statusCode, res.body).toBe(200)
    if (i > 0) continue
    // An MFA enrolment under way: its TOTP secret is sealed in user_mfa.
    const mfa = await api.post(`/v1/users/${res.json().user.id}/mfa/start_enrollment`, {
      auth,
      json: { issuer: 'Coffer backup tests' },
    })
    expect(mfa.statusCode, mfa.body).toBe(200)
    values.push(mfa.json().mfa.secret)
  }
  const group = await api.post('/v1/groups', {
    auth,
    form: { name: v('group'), policy: b64([{ Resources: ['Vault::.*'], Activities: 'R' }]) },
  })
  expect(group.statusCode, group.body).toBe(200)
  const sat = await api.post('/v1/scoped_access_tokens', {
    auth,
    json: {
      name: v('sat'),
      policy: [{ Resources: [`Vault::${vaultId}::Document::.*`], Activities: 'R' }],
      not_valid_after: new Date(Date.now() + 3_600_000).toISOString(),
    },
  })
  expect(sat.statusCode, sat.body).toBe(200)
  const blobs: Seeded['blobs'] = []
  for (const size of [0, 100, 200_000]) {
    const marker = v('blob')
    const content = Buffer.concat([Buffer.from(marker), randomBytes(size)])
    const res = await api.app.inject({
      method: 'POST',
      url: `/v1/vaults/${vaultId}/blobs`,
      headers: {
        authorization: `Basic ${Buffer.from(`${auth}:`).toString('base64')}`,
        'content-type': 'application/octet-stream',
      },
      query: { filename: `${v('filename')}.bin` },
      payload: content,
    })
    expect(res.statusCode, res.body).toBe(200)
    blobs.push({ id: res.json().blob_id, content })
  }
  return { values, vaultId, documents, blobs }
}
