import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyChains } from '../../src/audit/verify.js'
import { AuditWriter } from '../../src/audit/writer.js'
import type { Store } from '../../src/store/db.js'
import { WalGroupSync } from '../../src/store/wal-sync.js'
import { auditEvent } from '../helpers/audit-event.js'
import { openTestStore, testDialect } from '../helpers/store.js'

/**
 * The audit group commit on a SQLite file (issue 13; store/wal-sync.ts): a batch commits
 * without SQLite's in-commit fsync, and its appends are answered only once an fdatasync of the
 * WAL that started after the commit has ended. The connection is back to synchronous = FULL
 * after every batch (data writes keep it).
 */
const ACCOUNT = '01a00000-0000-7000-8000-0000000000ee'
const event = (accountId = ACCOUNT) => auditEvent(accountId)

describe.skipIf(testDialect !== 'sqlite')('audit batches on a SQLite file', () => {
  let dir: string
  let file: string
  let store: Store
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'coffer-audit-wal-'))
    file = join(dir, 'coffer.db')
    store = await openTestStore({ sqliteFile: file, sqliteReadWorkers: 0 })
  })
  afterAll(async () => {
    await store?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const synchronous = async () =>
    (await sql<{ synchronous: number }>`pragma synchronous`.execute(store.db)).rows[0]?.synchronous
  const stored = async () =>
    Number(
      (
        await store.db
          .selectFrom('audit_events')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('account_id', '=', ACCOUNT)
          .executeTakeFirstOrThrow()
      ).n,
    )

  it('the store of a file has a WAL sync; its real fdatasync answers the appends', async () => {
    expect(store.walSync).toBeDefined()
    const writer = new AuditWriter(store.db, 'sqlite', undefined, store.walSync)
    await Promise.all([writer.append(event()), writer.append(event())])
    expect(await stored()).toBe(2)
    expect(await synchronous()).toBe(2) // FULL
  })

  it('an append is answered only after the WAL sync that followed its commit', async () => {
    const syncs: { end: () => void; fail: (e: Error) => void }[] = []
    const walSync = new WalGroupSync(
      `${file}-wal`,
      () => new Promise<void>((resolve, reject) => syncs.push({ end: resolve, fail: reject })),
    )
    const writer = new AuditWriter(store.db, 'sqlite', undefined, walSync)
    const before = await stored()
    let answered = false
    const append = writer.append(event()).then(() => {
      answered = true
    })
    while (syncs.length === 0) await new Promise((r) => setTimeout(r, 1))
    // Committed (another reader sees it), FULL again, and not yet answered.
    expect(await stored()).toBe(before + 1)
    expect(await synchronous()).toBe(2)
    await new Promise((r) => setTimeout(r, 20))
    expect(answered).toBe(false)
    syncs[0]?.end()
    await append
    expect(answered).toBe(true)
    // A sync that fails fails its appends: the request is answered 503, never 200.
    const failing = writer.append(event())
    while (syncs.length < 2) await new Promise((r) => setTimeout(r, 1))
    syncs[1]?.fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }))
    await expect(failing).rejects.toMatchObject({ code: 'EIO' })
    await writer.close()
    expect((await verifyChains(store.db, ACCOUNT)).problems).toEqual([])
  })

  it('idle() waits for the sync of what is committed', async () => {
    let end: () => void = () => {}
    const walSync = new WalGroupSync(`${file}-wal`, () => new Promise<void>((r) => (end = r)))
    const writer = new AuditWriter(store.db, 'sqlite', undefined, walSync)
    const append = writer.append(event())
    let idle = false
    const waiting = writer.idle().then(() => {
      idle = true
    })
    await new Promise((r) => setTimeout(r, 30))
    expect(idle).toBe(false)
    end()
    await Promise.all([append, waiting])
    expect(idle).toBe(true)
  })
})
