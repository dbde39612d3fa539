import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../../src/store/db.js'
import { rawKeyLiteral } from '../../src/store/sqlite-cipher.js'
import { openTestSqliteFile, openTestStore, testDialect, testSqliteKey } from '../helpers/store.js'

/**
 * A write transaction on SQLite takes the write lock at its BEGIN (store/sqlite-write-driver.ts).
 * A deferred one that read first failed at once with SQLITE_BUSY(_SNAPSHOT) when another
 * connection wrote meanwhile — busy_timeout never applied — which a CI run met as a 503
 * DATABASE_UNAVAILABLE with two server processes and the CLI on one file.
 */
describe.skipIf(testDialect !== 'sqlite')('SQLite write transactions and other writers', () => {
  let dir: string
  let file: string
  let store: Store
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'coffer-write-lock-'))
    file = join(dir, 'coffer.db')
    store = await openTestStore({ sqliteFile: file, sqliteReadWorkers: 0 })
    await sql`create table scratch (id integer primary key, writer text not null)`.execute(store.db)
  })
  afterAll(async () => {
    await store?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('holds the write lock from BEGIN: another connection cannot write between its read and its write, and it commits', async () => {
    const other = openTestSqliteFile(file)
    other.pragma('busy_timeout = 0')
    let otherError: unknown
    try {
      await store.db.transaction().execute(async (trx) => {
        await trx.selectFrom('vaults').select('id').execute()
        try {
          other.prepare(`insert into scratch (writer) values ('other')`).run()
        } catch (error) {
          otherError = error
        }
        await sql`insert into scratch (writer) values ('store')`.execute(trx)
      })
    } finally {
      other.close()
    }
    // Before: the other connection's insert went in, and the transaction's own write failed
    // with SQLITE_BUSY_SNAPSHOT.
    expect((otherError as { code?: string } | undefined)?.code).toBe('SQLITE_BUSY')
    const rows = await sql<{ writer: string }>`select writer from scratch`.execute(store.db)
    expect(rows.rows.map((r) => r.writer)).toEqual(['store'])
  })

  it('a read-only transaction stays deferred: another connection writes while it is open', async () => {
    const other = openTestSqliteFile(file)
    other.pragma('busy_timeout = 0')
    try {
      const seen = await store.db
        .transaction()
        .setAccessMode('read only')
        .execute(async (trx) => {
          const before = await sql<{ n: number }>`select count(*) as n from scratch`.execute(trx)
          // A backup's snapshot runs so for minutes: writers must not wait behind it.
          other.prepare(`insert into scratch (writer) values ('beside')`).run()
          const after = await sql<{ n: number }>`select count(*) as n from scratch`.execute(trx)
          return [before.rows[0]?.n, after.rows[0]?.n]
        })
      // Its snapshot is fixed at its first read: the other write is not in it.
      expect(seen[0]).toBe(seen[1])
    } finally {
      other.close()
    }
    const rows = await sql<{
      n: number
    }>`select count(*) as n from scratch where writer = 'beside'`.execute(store.db)
    expect(rows.rows[0]?.n).toBe(1)
  })

  it('read-then-write transactions beside another thread writing in a loop: none fails', async () => {
    // The other writer: its own connection on a thread, committing small transactions nonstop.
    const stop = new Int32Array(new SharedArrayBuffer(4))
    const worker = new Worker(
      `
      const { workerData, parentPort } = require('node:worker_threads')
      const SQLite = require('better-sqlite3-multiple-ciphers')
      const db = new SQLite(workerData.file)
      db.pragma("cipher = 'sqlcipher'")
      db.pragma('legacy = 4')
      db.pragma(workerData.keyPragma)
      db.pragma('busy_timeout = 5000')
      const insert = db.prepare("insert into scratch (writer) values ('thread')")
      const stop = new Int32Array(workerData.stop)
      let n = 0
      parentPort.postMessage('started')
      while (Atomics.load(stop, 0) === 0) {
        db.exec('begin immediate')
        insert.run()
        db.exec('commit')
        n++
      }
      db.close()
      parentPort.postMessage(n)
      `,
      {
        eval: true,
        workerData: {
          file,
          keyPragma: `key = "${rawKeyLiteral(testSqliteKey(file))}"`,
          stop: stop.buffer,
        },
      },
    )
    await new Promise((resolve) => worker.once('message', resolve))
    const failures: string[] = []
    for (let i = 0; i < 300; i++) {
      try {
        await store.db.transaction().execute(async (trx) => {
          await sql`select count(*) from scratch`.execute(trx)
          // Let the other thread commit between this transaction's read and its write.
          await new Promise((r) => setImmediate(r))
          await sql`insert into scratch (writer) values ('store')`.execute(trx)
        })
      } catch (error) {
        failures.push(String((error as { code?: string }).code ?? error))
      }
    }
    const done = new Promise<number>((resolve) => worker.once('message', resolve))
    Atomics.store(stop, 0, 1)
    const written = await done
    await worker.terminate()
    expect(written).toBeGreaterThan(0)
    expect(failures).toEqual([])
  })
})
