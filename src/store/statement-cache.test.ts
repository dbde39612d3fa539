import SQLite from 'better-sqlite3-multiple-ciphers'
import { Kysely, SqliteDialect, sql } from 'kysely'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { cachingDatabase, DEFAULT_STATEMENT_CACHE } from './statement-cache.js'

const open: SQLite.Database[] = []

function database(): SQLite.Database {
  const db = new SQLite(':memory:')
  open.push(db)
  return db
}

afterEach(() => {
  for (const db of open.splice(0)) if (db.open) db.close()
})

describe('cachingDatabase', () => {
  it('returns the same statement object for the same SQL', () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    const cache = cachingDatabase(raw)
    const first = cache.prepare('select 1 as one')
    expect(cache.prepare('select 1 as one')).toBe(first)
    expect(cache.prepare('select 1 as one')).toBe(first)
    expect(prepare).toHaveBeenCalledTimes(1)
  })

  it('keeps statements for different SQL apart, byte for byte', () => {
    const raw = database()
    const cache = cachingDatabase(raw)
    const a = cache.prepare('select 1 as one')
    const b = cache.prepare('select 1 as one ')
    const c = cache.prepare('SELECT 1 as one')
    expect(new Set([a, b, c]).size).toBe(3)
  })

  it('evicts the least recently used statement beyond its capacity', () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    const cache = cachingDatabase(raw, { capacity: 2 })
    const a = cache.prepare('select 1')
    const b = cache.prepare('select 2')
    expect(cache.prepare('select 1')).toBe(a) // a is now the most recently used
    const c = cache.prepare('select 3') // evicts b, the least recently used
    expect(prepare).toHaveBeenCalledTimes(3)

    expect(cache.prepare('select 1')).toBe(a) // kept
    expect(cache.prepare('select 3')).toBe(c) // kept
    expect(prepare).toHaveBeenCalledTimes(3)

    const b2 = cache.prepare('select 2') // was evicted: prepared again, evicts a
    expect(b2).not.toBe(b)
    expect(prepare).toHaveBeenCalledTimes(4)
    expect(cache.prepare('select 3')).toBe(c)
    expect(cache.prepare('select 2')).toBe(b2)
    expect(prepare).toHaveBeenCalledTimes(4)
    expect(cache.prepare('select 1')).not.toBe(a)
    expect(prepare).toHaveBeenCalledTimes(5)
  })

  it('evicts in insertion order when nothing is reused', () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    const cache = cachingDatabase(raw, { capacity: 2 })
    for (const n of [1, 2, 3]) cache.prepare(`select ${n}`)
    cache.prepare('select 2')
    cache.prepare('select 3')
    expect(prepare).toHaveBeenCalledTimes(3)
    cache.prepare('select 1')
    expect(prepare).toHaveBeenCalledTimes(4)
  })

  it('holds one statement with capacity 1', () => {
    const raw = database()
    const cache = cachingDatabase(raw, { capacity: 1 })
    const a = cache.prepare('select 1')
    expect(cache.prepare('select 1')).toBe(a)
    cache.prepare('select 2')
    expect(cache.prepare('select 1')).not.toBe(a)
  })

  it('never keeps a statement whose SQL is longer than maxSqlLength', () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    const cache = cachingDatabase(raw, { maxSqlLength: 20 })
    const atLimit = 'select 1 as abcdefgh' // 20 characters
    const beyond = 'select 1 as abcdefghi' // 21
    expect(atLimit).toHaveLength(20)
    expect(cache.prepare(atLimit)).toBe(cache.prepare(atLimit))
    expect(prepare).toHaveBeenCalledTimes(1)
    expect(cache.prepare(beyond)).not.toBe(cache.prepare(beyond))
    expect(prepare).toHaveBeenCalledTimes(3)
  })

  it('evicts the least recently used statements to stay within totalSqlLength', () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    // Each SQL text is 10 characters: two fit in 20, a third evicts the oldest.
    const cache = cachingDatabase(raw, { totalSqlLength: 20 })
    const sql = (n: number) => `select ${n}`.padEnd(10, ' ')
    const a = cache.prepare(sql(1))
    const b = cache.prepare(sql(2))
    expect(cache.prepare(sql(1))).toBe(a) // a is now the most recently used
    cache.prepare(sql(3)) // 30 characters held: evicts b
    expect(prepare).toHaveBeenCalledTimes(3)
    expect(cache.prepare(sql(1))).toBe(a)
    expect(cache.prepare(sql(2))).not.toBe(b)
    expect(prepare).toHaveBeenCalledTimes(4)
  })

  it('by default keeps no statement longer than 16 KiB (thousands of bound values)', () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    const cache = cachingDatabase(raw)
    const long = `select 1 where 1 in (${Array(6000).fill('?').join(', ')})`
    expect(long.length).toBeGreaterThan(DEFAULT_STATEMENT_CACHE.maxSqlLength)
    cache.prepare(long)
    cache.prepare(long)
    expect(prepare).toHaveBeenCalledTimes(2)
  })

  it('does not cache SQL that fails to prepare', () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    const cache = cachingDatabase(raw, { capacity: 2 })
    expect(() => cache.prepare('select from nowhere')).toThrow()
    expect(() => cache.prepare('select from nowhere')).toThrow()
    expect(prepare).toHaveBeenCalledTimes(2)
  })

  it('close closes the underlying database', () => {
    const raw = database()
    const cache = cachingDatabase(raw)
    cache.prepare('select 1')
    expect(raw.open).toBe(true)
    cache.close()
    expect(raw.open).toBe(false)
  })

  it('closes the underlying database when Kysely is destroyed', async () => {
    const raw = database()
    const db = new Kysely<Record<string, never>>({
      dialect: new SqliteDialect({ database: cachingDatabase(raw) }),
    })
    await sql`select 1`.execute(db)
    await db.destroy()
    expect(raw.open).toBe(false)
  })

  it('serves Kysely correctly: reused statements bind fresh parameters each time', async () => {
    const raw = database()
    const prepare = vi.spyOn(raw, 'prepare')
    const db = new Kysely<{ t: { id: number; name: string } }>({
      dialect: new SqliteDialect({ database: cachingDatabase(raw, { capacity: 4 }) }),
    })
    await db.schema.createTable('t').addColumn('id', 'integer').addColumn('name', 'text').execute()
    for (let i = 0; i < 5; i++)
      await db
        .insertInto('t')
        .values({ id: i, name: `n${i}` })
        .execute()
    for (let i = 0; i < 5; i++) {
      const rows = await db.selectFrom('t').select('name').where('id', '=', i).execute()
      expect(rows).toEqual([{ name: `n${i}` }])
    }
    // Reader and writer statements both work from the cache.
    const updated = await db
      .updateTable('t')
      .set({ name: 'x' })
      .where('id', '=', 3)
      .executeTakeFirst()
    expect(updated.numUpdatedRows).toBe(1n)
    const again = await db
      .updateTable('t')
      .set({ name: 'y' })
      .where('id', '=', 9)
      .executeTakeFirst()
    expect(again.numUpdatedRows).toBe(0n)
    expect(await db.selectFrom('t').select('name').where('id', '=', 3).execute()).toEqual([
      { name: 'x' },
    ])
    // create table, insert, select, update: four distinct SQL texts, each prepared once.
    expect(prepare).toHaveBeenCalledTimes(4)
    await db.destroy()
  })
})
