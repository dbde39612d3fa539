import {
  createReadStream,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BlobNotFoundError, type BlobStore } from '../../src/blob/blob-store.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { ObjectExistsError } from '../../src/blob/s3-blob-store.js'
import type { S3Config } from '../../src/config-storage.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { MasterKeySet } from '../../src/crypto/master-key-set.js'
import { SEALED_CHUNK_BYTES } from '../../src/crypto/stream-cipher.js'
import { createBackup } from '../../src/modules/backup/backup-create.js'
import { openBackup, publish, s3StoreFor } from '../../src/modules/backup/backup-file.js'
import { HEADER_START_BYTES } from '../../src/modules/backup/backup-format.js'
import {
  authenticateBackup,
  restoreInto,
  targetProblem,
} from '../../src/modules/backup/backup-restore.js'
import { verifyBackup } from '../../src/modules/backup/backup-verify.js'
import type { Store } from '../../src/store/db.js'
import { migrateToLatest } from '../../src/store/migrate.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import {
  emptyTarget,
  expectNoValuesIn,
  type Seeded,
  secondStore,
  seed,
  testScratch,
  verifyCheck,
} from '../helpers/backup.js'
import { logicalDump } from '../helpers/db-dump.js'
import { startFaultyS3 } from '../helpers/faulty-s3.js'
import { startS3Server, type TestS3Server } from '../helpers/s3.js'
import { testDialect } from '../helpers/store.js'

/**
 * The backup file (issue 22, part 2): create → verify → restore in one process on the test
 * database, the file's integrity under every kind of damage, what the file must never show,
 * and a restore's refusal of a target that holds data.
 */

const dir = mkdtempSync(join(tmpdir(), 'coffer-backup-'))
const masterKey = MasterKey.generate()
const keys = new MasterKeySet(masterKey)
let t: TestApp
let snapshotStore: Store
let blobStore: FsBlobStore
let seeded: Seeded
let file: string
let dumpAtBackup: string

/**
 * The dump without Kysely's bookkeeping (a restore migrates, so its timestamps are new), each
 * table's rows sorted (a restore inserts in key order; `select *` answers in storage order).
 */
const dataOnly = (dump: string) =>
  dump
    .split('\n')
    .filter((line) => !line.startsWith('kysely_'))
    .map((line) => {
      const at = line.indexOf(': ')
      const rows = (JSON.parse(line.slice(at + 2)) as unknown[]).map((r) => JSON.stringify(r))
      return `${line.slice(0, at)}: ${rows.sort().join('\n')}`
    })
    .sort()
    .join('\n')

const readAll = async (stream: AsyncIterable<Buffer>) => {
  const parts: Buffer[] = []
  for await (const part of stream) parts.push(part)
  return Buffer.concat(parts)
}
const fileSource = (path: string) => createReadStream(path) as AsyncIterable<Buffer>
const bytesSource = (bytes: Buffer) => Readable.from([bytes]) as AsyncIterable<Buffer>

async function backupTo(path: string, store: BlobStore = blobStore) {
  return createBackup({
    snapshotStore,
    live: t.deps.store.db,
    blobStore: store,
    masterKey,
    location: { kind: 'file', path },
    s3: undefined,
  })
}

async function verify(source: AsyncIterable<Buffer>) {
  return verifyBackup(source, keys, testScratch(t.deps.store), verifyCheck(keys))
}

beforeAll(async () => {
  blobStore = new FsBlobStore(join(dir, 'blobs'))
  const sqliteFile = testDialect === 'sqlite' ? join(dir, 'coffer.db') : undefined
  t = await buildTestApp({ masterKey, blobStore, ...(sqliteFile ? { sqliteFile } : {}) })
  seeded = await seed(t.api, t.admin.api_key)
  snapshotStore = await secondStore(t.deps.store, sqliteFile)
  file = join(dir, 'one.cbk')
  dumpAtBackup = await logicalDump(t.deps.store)
  await backupTo(file)
}, 60_000)

afterAll(async () => {
  await snapshotStore?.close()
  await t?.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('backup create → verify → restore', () => {
  it('verifies: restored in a scratch location, every table hashed again, every record decrypts', async () => {
    const report = await verify(fileSource(file))
    expect(report.problem).toBeUndefined()
    expect(report.ok).toBe(true)
    expect(report.check?.checked.records).toMatchObject({ documents: 30, user_attributes: 4 })
    expect(report.check?.checked.blob_objects).toBe(3)
    expect(report.manifest?.objects.count).toBe(3)
    expect(report.manifest?.tables.documents?.rows).toBe(30)
  })

  it('restores every row and every object exactly as they were', async () => {
    const target = await emptyTarget(testDialect)
    try {
      await restoreInto(fileSource(file), keys, async () => target)
      await migrateToLatest(target.store.db)
      expect(dataOnly(await logicalDump(target.store)) === dataOnly(dumpAtBackup)).toBe(true)
      const before: string[] = []
      for await (const o of blobStore.list('a/')) before.push(o.key)
      expect(before).toHaveLength(3)
      for (const key of before) {
        const original = readFileSync(blobStore.pathFor(key))
        expect(readFileSync(new FsBlobStore(target.blobDir).pathFor(key)).equals(original)).toBe(
          true,
        )
      }
    } finally {
      await target.close()
    }
  })

  it('holds none of the values written, in UTF-8, UTF-16, hex or base64', () => {
    expect(seeded.values.length).toBeGreaterThan(50)
    expectNoValuesIn(file, seeded.values)
    // The same scan finds a value that is there (the scan itself works).
    const probe = join(dir, 'probe.bin')
    const value = seeded.values[0] as string
    writeFileSync(probe, Buffer.from(Buffer.from(value).toString('base64')))
    expect(() => expectNoValuesIn(probe, [value])).toThrow()
  })
})

describe('a damaged backup', () => {
  let bytes: Buffer
  let headerLength: number
  beforeAll(() => {
    bytes = readFileSync(file)
    headerLength = HEADER_START_BYTES + bytes.readUInt16BE(9) + 32
    expect(bytes.length).toBeGreaterThan(headerLength + 3 * SEALED_CHUNK_BYTES)
  })

  const flipped = (at: number) => {
    const copy = Buffer.from(bytes)
    copy[at] = (copy[at] as number) ^ 0x01
    return copy
  }

  it.each([
    ['the magic', () => 0, /not a Coffer backup/],
    ['the format version', () => 8, /header is damaged/],
    ['the header JSON', () => 20, /header is damaged/],
    ['the header checksum', () => headerLength - 1, /header is damaged/],
    ['the first chunk (meta)', () => headerLength + 3, /integrity check in chunk 0/],
    [
      'a middle chunk (rows, objects)',
      () => headerLength + 2 * SEALED_CHUNK_BYTES + 100,
      /integrity check in chunk 2/,
    ],
    ['the last chunk (manifest)', () => bytes.length - 40, /integrity check in chunk/],
    ['the last tag byte', () => bytes.length - 1, /integrity check in chunk/],
  ])('a flipped byte in %s fails verify, naming the problem', async (_label, at, problem) => {
    const report = await verify(bytesSource(flipped(at())))
    expect(report.ok).toBe(false)
    expect(report.problem).toMatch(problem)
  })

  it('a flipped byte anywhere is caught (every 997th byte)', async () => {
    for (let at = 0; at < bytes.length; at += 997) {
      await expect(
        authenticateBackup(bytesSource(flipped(at)), keys),
        `byte ${at}`,
      ).rejects.toThrow()
    }
  }, 120_000)

  it.each([
    ['inside the header', () => 10],
    ['at the end of the header', () => headerLength],
    ['at a chunk boundary', () => headerLength + SEALED_CHUNK_BYTES],
    ['inside a chunk', () => headerLength + SEALED_CHUNK_BYTES + 500],
    ['one byte short', () => bytes.length - 1],
  ])('a file truncated %s fails verify', async (_label, length) => {
    const report = await verify(bytesSource(bytes.subarray(0, length())))
    expect(report.ok).toBe(false)
    expect(report.problem).toMatch(/truncated|integrity check/)
  })

  it('a byte appended fails verify', async () => {
    const report = await verify(bytesSource(Buffer.concat([bytes, Buffer.from([0])])))
    expect(report.ok).toBe(false)
  })

  it('without the master key it needs, says which key that is', async () => {
    const other = new MasterKeySet(MasterKey.generate())
    await expect(authenticateBackup(fileSource(file), other)).rejects.toThrow(
      new RegExp(`needs master key ${masterKey.id}`),
    )
  })

  it('a previous master key opens it', async () => {
    const rotated = new MasterKeySet(MasterKey.generate(), [masterKey])
    await expect(authenticateBackup(fileSource(file), rotated)).resolves.toMatchObject({
      manifest: { master_key: masterKey.id },
    })
  })

  it('a damaged backup changes nothing in the target: the restore reads it whole first', async () => {
    const target = await emptyTarget(testDialect)
    try {
      const damaged = flipped(bytes.length - 40)
      await expect(authenticateBackup(bytesSource(damaged), keys)).rejects.toThrow(/integrity/)
      // Poured straight in (no first pass), it rolls back and removes the objects it wrote.
      await expect(restoreInto(bytesSource(damaged), keys, async () => target)).rejects.toThrow()
      expect(await targetProblem(target.store, target.blobStore)).toBeUndefined()
    } finally {
      await target.close()
    }
  })
})

describe('restore target', () => {
  it('a target with rows or objects is named as not empty', async () => {
    const target = await emptyTarget(testDialect)
    try {
      expect(await targetProblem(target.store, target.blobStore)).toBeUndefined()
      await restoreInto(fileSource(file), keys, async () => target)
      expect(await targetProblem(target.store, target.blobStore)).toMatch(/database is not empty/)
      expect(await targetProblem(undefined, target.blobStore)).toMatch(/BLOB store is not empty/)
    } finally {
      await target.close()
    }
  })
})

describe('writing a backup', () => {
  it('never replaces a file', async () => {
    const before = readFileSync(file)
    await expect(backupTo(file)).rejects.toThrow(/exists/)
    expect(readFileSync(file).equals(before)).toBe(true)
  })

  it('never replaces a file created under its name while it was written', async () => {
    const path = join(dir, 'meanwhile.cbk')
    let raced = false
    await expect(
      createBackup({
        snapshotStore,
        live: t.deps.store.db,
        blobStore,
        masterKey,
        location: { kind: 'file', path },
        s3: undefined,
        onProgress: () => {
          if (raced) return
          raced = true
          writeFileSync(path, 'another backup')
        },
      }),
    ).rejects.toThrow(/meanwhile\.cbk exists/)
    expect(raced).toBe(true)
    expect(readFileSync(path, 'utf8')).toBe('another backup')
    expect(readdirSync(dir).filter((n) => n.includes('meanwhile'))).toEqual(['meanwhile.cbk'])
  })

  it('without hard links: copied to an exclusively created name, never over a file', async () => {
    const noLinks = (before?: (to: string) => void) => async (_from: string, to: string) => {
      before?.(to)
      throw Object.assign(new Error('operation not permitted'), { code: 'EPERM' })
    }
    const temp = join(dir, '.nolink.partial')
    const target = join(dir, 'nolink.cbk')
    writeFileSync(temp, 'the new backup')
    // A file appears under the name between the check and the publication.
    await expect(
      publish(
        temp,
        target,
        noLinks((to) => writeFileSync(to, 'another backup')),
      ),
    ).rejects.toThrow(/nolink\.cbk exists/)
    expect(readFileSync(target, 'utf8')).toBe('another backup')
    rmSync(target)
    await publish(temp, target, noLinks())
    expect(readFileSync(target, 'utf8')).toBe('the new backup')
    expect(existsSync(temp)).toBe(false)
  })

  it('leaves nothing under its name (nor a temp file) when it fails mid-way', async () => {
    let gets = 0
    const failing: BlobStore = {
      ...blobStore,
      kind: 'fs',
      put: (k, b) => blobStore.put(k, b),
      exists: (k) => blobStore.exists(k),
      delete: (k) => blobStore.delete(k),
      check: () => blobStore.check(),
      list: (p) => blobStore.list(p),
      get: async (key) => {
        if (++gets === 2) {
          // A store that dies mid-object.
          return Readable.from(
            (async function* () {
              yield Buffer.alloc(10)
              throw new Error('store went away')
            })(),
          )
        }
        return blobStore.get(key)
      },
    }
    const path = join(dir, 'failed.cbk')
    await expect(backupTo(path, failing)).rejects.toThrow(/store went away/)
    expect(existsSync(path)).toBe(false)
    expect(readdirSync(dir).filter((n) => n.includes('failed'))).toEqual([])
  })

  it('a BLOB whose object is lost fails the backup, naming it', async () => {
    const lost: BlobStore = {
      ...blobStore,
      kind: 'fs',
      put: (k, b) => blobStore.put(k, b),
      exists: (k) => blobStore.exists(k),
      delete: (k) => blobStore.delete(k),
      check: () => blobStore.check(),
      list: (p) => blobStore.list(p),
      get: async (key) => {
        throw new BlobNotFoundError(key)
      },
    }
    const path = join(dir, 'lost.cbk')
    await expect(backupTo(path, lost)).rejects.toThrow(/BLOB store does not have/)
    expect(existsSync(path)).toBe(false)
  })
})

describe('BLOBs changed while the backup runs', () => {
  const upload = async (method: 'POST' | 'PUT', url: string, content: Buffer) => {
    const res = await t.app.inject({
      method,
      url,
      headers: {
        authorization: `Basic ${Buffer.from(`${t.admin.api_key}:`).toString('base64')}`,
        'content-type': 'application/octet-stream',
      },
      payload: content,
    })
    expect(res.statusCode, res.body).toBe(200)
    return res
  }

  it('a BLOB deleted after the snapshot is left out; one given new content carries it', async () => {
    const blobs = `/v1/vaults/${seeded.vaultId}/blobs`
    const deleted = (await upload('POST', blobs, Buffer.from('to be deleted'))).json().blob_id
    const replaced = (await upload('POST', blobs, Buffer.from('first content'))).json().blob_id
    let raced = false
    // On the first object copied (an older BLOB), the two newest change: the snapshot still
    // names their old objects, which are gone by the time the backup reaches them.
    const racing: BlobStore = {
      kind: 'fs',
      put: (k, b) => blobStore.put(k, b),
      exists: (k) => blobStore.exists(k),
      delete: (k) => blobStore.delete(k),
      check: () => blobStore.check(),
      list: (p) => blobStore.list(p),
      get: async (key) => {
        if (!raced) {
          raced = true
          const gone = await t.api.delete(`${blobs}/${deleted}`, { auth: t.admin.api_key })
          expect(gone.statusCode, gone.body).toBe(200)
          await upload('PUT', `${blobs}/${replaced}`, Buffer.from('second content'))
        }
        return blobStore.get(key)
      },
    }
    const path = join(dir, 'raced.cbk')
    const result = await backupTo(path, racing)
    expect(result.manifest.blobs_changed_during_backup).toEqual({ deleted: 1, replaced: 1 })
    const report = await verify(fileSource(path))
    expect(report.problem).toBeUndefined()
    expect(report.ok).toBe(true)
    const target = await emptyTarget(testDialect)
    try {
      await restoreInto(fileSource(path), keys, async () => target)
      await migrateToLatest(target.store.db)
      const rows = await target.store.db
        .selectFrom('blobs')
        .select(['id', 'object_key'])
        .where('id', 'in', [deleted, replaced])
        .execute()
      const now = await t.deps.store.db
        .selectFrom('blobs')
        .select('object_key')
        .where('id', '=', replaced)
        .executeTakeFirstOrThrow()
      expect(rows).toEqual([{ id: replaced, object_key: now.object_key }])
    } finally {
      await target.close()
    }
  })
})

describe('writing a backup to S3', () => {
  let s3: TestS3Server
  let s3Config: S3Config
  beforeAll(async () => {
    s3 = await startS3Server('coffer-backups')
    s3Config = {
      endpoint: s3.endpoint,
      region: s3.region,
      bucket: s3.bucket,
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
      forcePathStyle: true,
      prefix: '',
      connectTimeoutMs: 5000,
      requestTimeoutMs: 10_000,
      deadlineMs: 15_000,
    }
  })
  afterAll(async () => {
    await s3?.close()
  })

  const toS3 = (key: string, store: BlobStore = blobStore) =>
    createBackup({
      snapshotStore,
      live: t.deps.store.db,
      blobStore: store,
      masterKey,
      location: { kind: 's3', bucket: s3.bucket, key },
      s3: s3Config,
    })

  it('writes the object, which verifies; never replaces one', async () => {
    const result = await toS3('nightly/one.cbk')
    expect(result.location).toBe(`s3://${s3.bucket}/nightly/one.cbk`)
    const opened = await openBackup(
      { kind: 's3', bucket: s3.bucket, key: 'nightly/one.cbk' },
      s3Config,
    )
    try {
      const report = await verify(opened.stream as AsyncIterable<Buffer>)
      expect(report.problem).toBeUndefined()
      expect(report.ok).toBe(true)
    } finally {
      opened.close()
    }
    await expect(toS3('nightly/one.cbk')).rejects.toThrow(/exists/)
  })

  it('never replaces an object written meanwhile under its key (a conditional write)', async () => {
    // AWS S3 honours If-None-Match: * (s3rver does not: the proxy does, as S3 would).
    const proxy = await startFaultyS3(s3.endpoint)
    proxy.conditionalWrites = true
    const direct = s3StoreFor(s3Config, s3.bucket)
    const other = Buffer.from('a backup another node wrote')
    let raced = false
    // After the existence check said "absent", before the upload: another writer's object.
    proxy.beforeRequest = async (method, url) => {
      if (raced || method !== 'PUT' || !url.includes('raced.cbk')) return
      raced = true
      await direct.put('nightly/raced.cbk', Readable.from([other]))
    }
    try {
      await expect(
        createBackup({
          snapshotStore,
          live: t.deps.store.db,
          blobStore,
          masterKey,
          location: { kind: 's3', bucket: s3.bucket, key: 'nightly/raced.cbk' },
          s3: { ...s3Config, endpoint: proxy.endpoint },
        }),
      ).rejects.toThrow(/nightly\/raced\.cbk exists/)
      expect(raced).toBe(true)
      expect(await readAll(await direct.get('nightly/raced.cbk'))).toEqual(other)
    } finally {
      direct.close()
      await proxy.close()
    }
  })

  it('a multipart upload is conditional too (If-None-Match on its completion)', async () => {
    const proxy = await startFaultyS3(s3.endpoint)
    proxy.conditionalWrites = true
    const direct = s3StoreFor(s3Config, s3.bucket)
    const viaProxy = s3StoreFor({ ...s3Config, endpoint: proxy.endpoint }, s3.bucket)
    const other = Buffer.from('the first object')
    try {
      await direct.put('nightly/large.cbk', Readable.from([other]))
      const large = Buffer.alloc(6 * 1024 * 1024, 7)
      await expect(
        viaProxy.put('nightly/large.cbk', Readable.from([large]), { ifAbsent: true }),
      ).rejects.toBeInstanceOf(ObjectExistsError)
      expect(proxy.requests.some((r) => r.startsWith('POST') && r.includes('uploadId'))).toBe(true)
      expect(await readAll(await direct.get('nightly/large.cbk'))).toEqual(other)
      // Absent: the same conditional upload goes through.
      await viaProxy.put('nightly/large-new.cbk', Readable.from([large]), { ifAbsent: true })
      expect((await readAll(await direct.get('nightly/large-new.cbk'))).equals(large)).toBe(true)
    } finally {
      direct.close()
      viaProxy.close()
      await proxy.close()
    }
  }, 60_000)

  it('leaves no object under the key when it fails mid-way', async () => {
    const failing: BlobStore = {
      kind: 'fs',
      put: (k, b) => blobStore.put(k, b),
      exists: (k) => blobStore.exists(k),
      delete: (k) => blobStore.delete(k),
      check: () => blobStore.check(),
      list: (p) => blobStore.list(p),
      get: async () =>
        Readable.from(
          (async function* () {
            yield Buffer.alloc(10)
            throw new Error('store went away')
          })(),
        ),
    }
    await expect(toS3('nightly/failed.cbk', failing)).rejects.toThrow(/store went away/)
    const store = s3StoreFor(s3Config, s3.bucket)
    try {
      expect(await store.exists('nightly/failed.cbk')).toBe(false)
    } finally {
      store.close()
    }
  })
})
