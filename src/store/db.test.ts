import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { openStore, SQLITE_JOURNAL_SIZE_LIMIT } from './db.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('openStore (SQLite file)', () => {
  it('cuts the WAL back to the journal size limit after a write larger than it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-wal-'))
    dirs.push(dir)
    const file = join(dir, 'coffer.db')
    const store = openStore({ url: file })
    try {
      await sql`create table big (b blob)`.execute(store.db)
      // One transaction of 1.5 x the limit: the WAL must grow past the limit to hold it.
      const rows = Math.ceil((1.5 * SQLITE_JOURNAL_SIZE_LIMIT) / 65536)
      await store.db.transaction().execute(async (trx) => {
        for (let i = 0; i < rows; i++)
          await sql`insert into big values (randomblob(65536))`.execute(trx)
      })
      expect(statSync(`${file}-wal`).size).toBeGreaterThan(SQLITE_JOURNAL_SIZE_LIMIT)
      // The automatic checkpoint has copied it back; the next write starts the WAL over.
      await sql`pragma wal_checkpoint(passive)`.execute(store.db)
      await sql`insert into big values (x'00')`.execute(store.db)
      expect(statSync(`${file}-wal`).size).toBeLessThanOrEqual(SQLITE_JOURNAL_SIZE_LIMIT)
    } finally {
      await store.close()
    }
  })
})
