import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { type CompiledQuery, sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { QueryStopped } from '../../src/store/bounded-query.js'
import { BoundedReads, ReadsBusy } from '../../src/store/bounded-reads.js'
import { openStore, type Store } from '../../src/store/db.js'
import { ReadPool, ReadPoolUnavailable } from '../../src/store/read-pool.js'
import { openTestSqliteStore, testDialect } from '../helpers/store.js'

/**
 * The SQLite read pool (issue 14) on a real file: worker threads with read-only connections run
 * compiled queries, see every committed write, are stopped by the time bound (their thread
 * terminated and replaced) and are admitted by a bounded queue. A statement made slow on
 * purpose: a recursive count to tens of millions runs for seconds inside SQLite.
 */
const dir = mkdtempSync(join(tmpdir(), 'coffer-read-pool-'))

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (check()) return true
    await sleep(25)
  }
  return check()
}

describe.skipIf(testDialect !== 'sqlite')('SQLite read pool', () => {
  let store: Store
  const compile = (q: { compile(db: Store['db']): CompiledQuery }) => q.compile(store.db)
  const slow = () =>
    compile(
      sql`with recursive c(x) as (select 1 union all select x + 1 from c where x < ${10_000_000}) select count(*) as n from c`,
    )
  const count = () => compile(sql`select count(*) as n from t`)

  beforeAll(async () => {
    // Encrypted, as `coffer serve` opens it: each worker's read-only connection needs the key.
    store = openTestSqliteStore(join(dir, 'pool.db'), { sqliteReadWorkers: 2 })
    await sql`create table t (x integer)`.execute(store.db)
  })
  afterAll(async () => {
    await store?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('has no pool on an in-memory database (its workers could not see it)', async () => {
    const memory = openStore({ url: ':memory:', sqliteReadWorkers: 2 })
    expect(memory.readPool).toBeUndefined()
    await memory.close()
  })

  it('runs on a worker and sees every write committed before it was asked', async () => {
    const reads = new BoundedReads(store.db, { concurrency: 1, queue: 0 }, store.readPool)
    for (let i = 1; i <= 30; i++) {
      await sql`insert into t (x) values (${i})`.execute(store.db)
      const [rows] = await reads.run([count()], { timeoutMs: 5000 })
      expect(rows).toEqual([{ n: i }])
    }
  })

  it('refuses to write, whatever SQL it is handed', async () => {
    const reads = new BoundedReads(store.db, { concurrency: 1, queue: 0 }, store.readPool)
    await expect(
      reads.run([compile(sql`insert into t (x) values (0) returning x`)], { timeoutMs: 5000 }),
    ).rejects.toThrow(/readonly|read-only/i)
  })

  it('stops reads past their bound, replaces their threads, and the old threads end', async () => {
    const pool = store.readPool
    if (!pool) throw new Error('no read pool')
    const reads = new BoundedReads(store.db, { concurrency: 2, queue: 0 }, pool)
    const errors = await Promise.all(
      [slow(), slow()].map((q) => reads.run([q], { timeoutMs: 100 }).catch((e: unknown) => e)),
    )
    for (const error of errors) {
      expect(error).toBeInstanceOf(QueryStopped)
      expect((error as QueryStopped).reason).toBe('timeout')
    }
    // The statements cannot be interrupted: their threads are abandoned until they return,
    // and fresh ones serve meanwhile.
    expect(pool.abandoned()).toBe(2)
    expect(pool.liveThreads()).toBe(4)
    // As many abandoned threads as the pool has: more reads are refused, not piled up.
    await expect(reads.run([count()], { timeoutMs: 5000 })).rejects.toBeInstanceOf(ReadsBusy)
    // Nothing is left running afterwards: the abandoned threads exit once SQLite returns.
    expect(await until(() => pool.abandoned() === 0, 60_000)).toBe(true)
    expect(pool.liveThreads()).toBe(2)
    const [rows] = await reads.run([count()], { timeoutMs: 5000 })
    expect(rows).toEqual([{ n: 30 }])
  }, 90_000)

  it('queues up to its bound, refuses one more, and stops a read whose client left', async () => {
    const pool = store.readPool
    if (!pool) throw new Error('no read pool')
    const reads = new BoundedReads(store.db, { concurrency: 1, queue: 1 }, pool)
    const client = new AbortController()
    const running = reads.run([slow()], { timeoutMs: 60_000, signal: client.signal })
    const queued = reads.run([count()], { timeoutMs: 60_000 })
    await Promise.resolve()
    expect(reads.load()).toEqual({ running: 1, queued: 1 })
    await expect(reads.run([count()], { timeoutMs: 60_000 })).rejects.toBeInstanceOf(ReadsBusy)
    client.abort()
    const error = await running.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(QueryStopped)
    expect((error as QueryStopped).reason).toBe('aborted')
    // The queued read gets the freed slot and a fresh thread.
    expect((await queued)[0]).toEqual([{ n: 30 }])
    expect(await until(() => pool.abandoned() === 0, 60_000)).toBe(true)
  }, 90_000)

  it('times out a read still waiting in the queue', async () => {
    const reads = new BoundedReads(store.db, { concurrency: 1, queue: 1 }, store.readPool)
    const client = new AbortController()
    const running = reads.run([slow()], { timeoutMs: 60_000, signal: client.signal })
    const waited = await reads.run([count()], { timeoutMs: 100 }).catch((e: unknown) => e)
    expect(waited).toBeInstanceOf(QueryStopped)
    expect((waited as QueryStopped).reason).toBe('timeout')
    expect(reads.load()).toEqual({ running: 1, queued: 0 })
    client.abort()
    await running.catch(() => undefined)
    expect(await until(() => store.readPool?.abandoned() === 0, 60_000)).toBe(true)
  }, 90_000)

  it('refuses reads at once while its workers cannot start, and starts afresh after retryMs', async () => {
    // The real worker on a file that does not exist yet: its connection cannot open.
    const file = join(dir, 'later.db')
    const pool = new ReadPool({ file, threads: 2, busyTimeoutMs: 1000, retryMs: 1500 })
    const reads = new BoundedReads(store.db, { concurrency: 2, queue: 4 }, pool)
    const select = compile(sql`select 1 as one`)
    try {
      // The first read may meet a thread as it dies, or the failed pool: either way at once
      // (well within its bound), never after the bound's 60 s.
      for (let i = 0; i < 4; i++) {
        const started = Date.now()
        const error = await reads.run([select], { timeoutMs: 60_000 }).catch((e: unknown) => e)
        expect(error).toBeInstanceOf(ReadPoolUnavailable)
        expect(Date.now() - started).toBeLessThan(20_000)
      }
      expect(pool.failure()).toBeDefined()
      // Refused without waiting while failed, concurrent reads too.
      const started = Date.now()
      const errors = await Promise.all(
        [1, 2, 3].map(() => reads.run([select], { timeoutMs: 60_000 }).catch((e: unknown) => e)),
      )
      for (const error of errors) expect(error).toBeInstanceOf(ReadPoolUnavailable)
      expect(Date.now() - started).toBeLessThan(500)
      expect(reads.load()).toEqual({ running: 0, queued: 0 })
      // The cause passes: the next read after retryMs starts a fresh pool and is answered.
      writeFileSync(file, '')
      await sleep(1600)
      const [rows] = await reads.run([select], { timeoutMs: 60_000 })
      expect(rows).toEqual([{ one: 1 }])
      expect(pool.failure()).toBeUndefined()
    } finally {
      await pool.close()
    }
  }, 90_000)

  it("returns a statement's error with its code (it crossed the thread as a value)", async () => {
    const reads = new BoundedReads(store.db, { concurrency: 1, queue: 0 }, store.readPool)
    const error = await reads
      .run([compile(sql`select * from no_such_table`)], { timeoutMs: 5000 })
      .catch((e: unknown) => e)
    expect(error).not.toBeInstanceOf(ReadPoolUnavailable)
    expect(error).toMatchObject({
      message: expect.stringMatching(/no such table/),
      code: 'SQLITE_ERROR',
    })
  })
})
