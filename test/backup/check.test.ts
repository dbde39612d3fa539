import { randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { blobKey } from '../../src/blob/blob-store.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { MasterKeySet } from '../../src/crypto/master-key-set.js'
import type { CheckReport } from '../../src/modules/backup/check.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import { checkOf, type Seeded, seed } from '../helpers/backup.js'

/** `coffer check` (issue 22, part 2): it finds each kind of damage, and only that. */

const dir = mkdtempSync(join(tmpdir(), 'coffer-check-'))
const masterKey = MasterKey.generate()
const keys = new MasterKeySet(masterKey)
let t: TestApp
let blobStore: FsBlobStore
let seeded: Seeded

const check = () => checkOf(t.deps.store, blobStore, keys)
const kinds = (report: CheckReport) => report.problems.map((p) => p.kind)

/** Undoes each test's damage (tests run in order, each from a whole database). */
let undo: (() => Promise<void> | void)[] = []

beforeAll(async () => {
  blobStore = new FsBlobStore(join(dir, 'blobs'))
  t = await buildTestApp({ masterKey, blobStore })
  seeded = await seed(t.api, t.admin.api_key)
}, 60_000)

afterAll(async () => {
  await t?.close()
  rmSync(dir, { recursive: true, force: true })
})

beforeEach(async () => {
  for (const u of undo.reverse()) await u()
  undo = []
})

async function objectKeyOf(blobId: string): Promise<string> {
  const row = await t.deps.store.db
    .selectFrom('blobs')
    .select('object_key')
    .where('id', '=', blobId)
    .executeTakeFirstOrThrow()
  return row.object_key
}

describe('coffer check', () => {
  it('passes a whole database, having opened everything', async () => {
    const report = await check()
    expect(report.problems).toEqual([])
    expect(report.ok).toBe(true)
    expect(report.checked.data_keys).toBe(1)
    expect(report.checked.records).toEqual({
      documents: 30,
      user_attributes: 4,
      mfa_secrets: 0,
      mfa_pending_secrets: 1,
      password_reset_flow_keys: 0,
    })
    expect(report.checked.blob_objects).toBe(3)
    expect(report.checked.objects_listed).toBe(3)
    expect(report.checked.blob_bytes).toBe(seeded.blobs.reduce((n, b) => n + b.content.length, 0))
  })

  it('names a BLOB whose object is missing', async () => {
    const blob = seeded.blobs[1] as Seeded['blobs'][number]
    const file = blobStore.pathFor(await objectKeyOf(blob.id))
    const bytes = readFileSync(file)
    unlinkSync(file)
    undo.push(() => writeFileSync(file, bytes))
    const report = await check()
    expect(report.ok).toBe(false)
    expect(kinds(report)).toEqual(['missing_object'])
    expect(report.problems[0]?.where).toContain(blob.id)
  })

  it('names an object no BLOB row names (an orphan)', async () => {
    const key = blobKey(t.admin.account_id, seeded.vaultId, randomUUID(), randomUUID())
    await blobStore.put(key, Readable.from([Buffer.from('stray')]))
    undo.push(() => blobStore.delete(key))
    const report = await check()
    expect(kinds(report)).toEqual(['orphaned_object'])
    expect(report.problems[0]?.where).toBe(key)
  })

  it('names a document whose ciphertext was altered', async () => {
    const doc = seeded.documents[3] as Seeded['documents'][number]
    const row = await t.deps.store.db
      .selectFrom('documents')
      .select('content')
      .where('id', '=', doc.id)
      .executeTakeFirstOrThrow()
    const body = row.content.split('.')
    const sealed = Buffer.from(body[2] as string, 'base64')
    sealed[20] = (sealed[20] as number) ^ 1
    const altered = `${body[0]}.${body[1]}.${sealed.toString('base64')}`
    const set = (content: string) =>
      t.deps.store.db.updateTable('documents').set({ content }).where('id', '=', doc.id).execute()
    await set(altered)
    undo.push(async () => {
      await set(row.content)
    })
    const report = await check()
    expect(kinds(report)).toEqual(['record'])
    expect(report.problems[0]?.where).toContain(`documents ${doc.id}`)
  })

  it('names an MFA secret whose ciphertext was altered', async () => {
    const row = await t.deps.store.db
      .selectFrom('user_mfa')
      .select(['user_id', 'pending_secret'])
      .where('pending_secret', 'is not', null)
      .executeTakeFirstOrThrow()
    const before = row.pending_secret as string
    const body = before.split('.')
    const sealed = Buffer.from(body[2] as string, 'base64')
    sealed[20] = (sealed[20] as number) ^ 1
    const set = (pending_secret: string) =>
      t.deps.store.db
        .updateTable('user_mfa')
        .set({ pending_secret })
        .where('user_id', '=', row.user_id)
        .execute()
    await set(`${body[0]}.${body[1]}.${sealed.toString('base64')}`)
    undo.push(async () => {
      await set(before)
    })
    const report = await check()
    expect(kinds(report)).toEqual(['record'])
    expect(report.problems[0]?.where).toContain(`mfa_pending_secrets ${row.user_id}`)
  })

  it('names a BLOB whose stored content was altered', async () => {
    const blob = seeded.blobs[2] as Seeded['blobs'][number]
    const file = blobStore.pathFor(await objectKeyOf(blob.id))
    const bytes = readFileSync(file)
    const altered = Buffer.from(bytes)
    altered[100_000] = (altered[100_000] as number) ^ 1
    writeFileSync(file, altered)
    undo.push(() => writeFileSync(file, bytes))
    const report = await check()
    expect(kinds(report)).toEqual(['blob_content'])
  })

  it('names a data key no master key held unwraps', async () => {
    const other = new MasterKeySet(MasterKey.generate())
    const report = await checkOf(t.deps.store, blobStore, other)
    expect(report.ok).toBe(false)
    expect(kinds(report)[0]).toBe('data_key')
    expect(report.problems_total).toBeGreaterThan(30)
  })
})
