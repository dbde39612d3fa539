import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { b64, basicHeader, buildTestApp, errorOf, type TestApp } from '../helpers/app.js'
import { multipart } from '../helpers/blob-harness.js'

/**
 * Fail-closed (issue 13): when the trail cannot store a request's event, the request is
 * answered 503 AUDIT_UNAVAILABLE and its write is rolled back. The refusal is real: a trigger
 * on `audit_events` that aborts every insert, created (and dropped) here.
 */
let t: TestApp
let blobDir: string
let vaultId: string
let docId: string
let blobId: string

function filesUnder(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...filesUnder(path))
    else out.push(path)
  }
  return out
}

async function refuseAppends(): Promise<void> {
  const db = t.deps.store.db
  if (t.deps.store.dialect === 'sqlite') {
    await sql`create trigger audit_refuse before insert on audit_events begin select raise(abort, 'audit refused by test'); end`.execute(
      db,
    )
    return
  }
  await sql`create or replace function audit_refuse() returns trigger language plpgsql as $$ begin raise exception 'audit refused by test'; end $$`.execute(
    db,
  )
  await sql`create trigger audit_refuse before insert on audit_events for each row execute function audit_refuse()`.execute(
    db,
  )
}

async function allowAppends(): Promise<void> {
  const db = t.deps.store.db
  if (t.deps.store.dialect === 'sqlite') await sql`drop trigger audit_refuse`.execute(db)
  else await sql`drop trigger audit_refuse on audit_events`.execute(db)
}

const upload = (data: string) => {
  const m = multipart([{ name: 'file', filename: 'a.txt', type: 'text/plain', data }])
  return t.app.inject({
    method: 'POST',
    url: `/v1/vaults/${vaultId}/blobs`,
    headers: { 'content-type': m.contentType, authorization: basicHeader(t.admin.api_key) },
    payload: m.payload,
  })
}

beforeAll(async () => {
  blobDir = mkdtempSync(join(tmpdir(), 'coffer-audit-blobs-'))
  t = await buildTestApp({ blobStore: new FsBlobStore(blobDir) })
  const auth = t.admin.api_key
  vaultId = (await t.api.post('/v1/vaults', { auth, form: { name: 'fc' } })).json().vault.id
  docId = (
    await t.api.post(`/v1/vaults/${vaultId}/documents`, { auth, form: { document: b64({ a: 1 }) } })
  ).json().document_id
  const up = await upload('hello')
  expect(up.statusCode, up.body).toBe(200)
  blobId = up.json().blob_id
})
afterAll(async () => {
  await t.close()
  rmSync(blobDir, { recursive: true, force: true })
})

function expectAuditUnavailable(res: { statusCode: number; headers: Record<string, unknown> }) {
  expect(res.statusCode).toBe(503)
  expect(res.headers['retry-after']).toBe('1')
  expect(errorOf(res as never)).toMatchObject({
    code: 'AUDIT_UNAVAILABLE',
    type: 'service_unavailable',
  })
}

describe('an event that cannot be stored fails its request', () => {
  it('a write is answered 503 and leaves nothing behind (vault, document, BLOB row and object)', async () => {
    const auth = t.admin.api_key
    const db = t.deps.store.db
    const count = async (table: 'vaults' | 'documents' | 'blobs') =>
      Number(
        (
          await db
            .selectFrom(table)
            .select((e) => e.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    const before = { vaults: await count('vaults'), documents: await count('documents') }
    const blobsBefore = await count('blobs')
    const filesBefore = filesUnder(blobDir).length
    await refuseAppends()
    try {
      expectAuditUnavailable(await t.api.post('/v1/vaults', { auth, form: { name: 'lost' } }))
      expectAuditUnavailable(
        await t.api.post(`/v1/vaults/${vaultId}/documents`, {
          auth,
          form: { document: b64({ lost: true }) },
        }),
      )
      expectAuditUnavailable(
        await t.api.delete(`/v1/vaults/${vaultId}/documents/${docId}`, { auth }),
      )
      expectAuditUnavailable(await upload('lost bytes'))
      expect(await count('vaults')).toBe(before.vaults)
      expect(await count('documents')).toBe(before.documents)
      expect(await count('blobs')).toBe(blobsBefore)
      expect(filesUnder(blobDir)).toHaveLength(filesBefore)
    } finally {
      await allowAppends()
    }
    // The document the refused delete named is still there.
    const read = await t.api.get(`/v1/vaults/${vaultId}/documents/${docId}`, { auth })
    expect(read.statusCode).toBe(200)
  })

  it('reads, refusals and streamed downloads are answered 503 without their content', async () => {
    const auth = t.admin.api_key
    await refuseAppends()
    try {
      const read = await t.api.get(`/v1/vaults/${vaultId}/documents/${docId}`, { auth })
      expectAuditUnavailable(read)
      expect(read.body).not.toContain(b64({ a: 1 }))
      expectAuditUnavailable(await t.api.get('/v1/vaults', { auth: 'unknown-key' }))
      const download = await t.api.get(`/v1/vaults/${vaultId}/blobs/${blobId}`, { auth })
      expectAuditUnavailable(download)
      expect(download.body).not.toContain('hello')
      // A URL the router refuses before any route (decisions.md 223): its event too.
      for (const url of [`/v1/vaults/${vaultId}%E0%A4%A`, `/v1/vaults/${'a'.repeat(9000)}`]) {
        expectAuditUnavailable(
          await t.app.inject({ method: 'GET', url, headers: { authorization: basicHeader(auth) } }),
        )
      }
    } finally {
      await allowAppends()
    }
    const download = await t.api.get(`/v1/vaults/${vaultId}/blobs/${blobId}`, { auth })
    expect(download.statusCode).toBe(200)
    expect(download.body).toBe('hello')
  })
})

describe('the audit event and the operations count of a metered read', () => {
  const usageToday = async () => {
    const day = new Date().toISOString().slice(0, 10)
    const res = await t.api.get(`/v1/accounts/${t.admin.account_id}/usage`, {
      auth: t.admin.api_key,
      query: { from: day, to: day },
    })
    expect(res.statusCode, res.body).toBe(200)
    return res.json().usage.totals.document_read as number
  }

  it('the event carries what the read consumed; a read whose event is refused counts nothing', async () => {
    const auth = t.admin.api_key
    const db = t.deps.store.db
    const before = await usageToday()
    const read = await t.api.get(`/v2/vaults/${vaultId}/documents/${docId}`, { auth })
    expect(read.statusCode, read.body).toBe(200)
    const event = await db
      .selectFrom('audit_events')
      .select(['operations_consumed', 'operations_category'])
      .where('transaction_id', '=', read.json().transaction_id)
      .executeTakeFirstOrThrow()
    expect(event).toEqual({ operations_consumed: 1, operations_category: 'document_read' })
    expect(await usageToday()).toBe(before + 1)

    await refuseAppends()
    try {
      expectAuditUnavailable(await t.api.get(`/v2/vaults/${vaultId}/documents/${docId}`, { auth }))
    } finally {
      await allowAppends()
    }
    expect(await usageToday()).toBe(before + 1)
  })
})
