import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openTestStore } from '../../test/helpers/store.js'
import type { Store } from './db.js'
import { isDatabaseUnavailable, isStorageFull } from './db-errors.js'

const withCode = (code: string) => Object.assign(new Error('x'), { code })

describe('isDatabaseUnavailable', () => {
  it('knows a lost connection, a refused one, a cancelled statement and a locked SQLite file', () => {
    for (const code of ['57P01', '57P02', '57P03', '57014', '08006', '08001', 'ECONNRESET'])
      expect(isDatabaseUnavailable(withCode(code)), code).toBe(true)
    expect(isDatabaseUnavailable(withCode('SQLITE_BUSY_SNAPSHOT'))).toBe(true)
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true)
  })

  it('leaves every other error alone (a 500 stays a 500, a constraint stays a constraint)', () => {
    for (const code of ['23505', '23503', '42P01', '22P02', 'SQLITE_CONSTRAINT_UNIQUE'])
      expect(isDatabaseUnavailable(withCode(code)), code).toBe(false)
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false)
    expect(isDatabaseUnavailable(null)).toBe(false)
  })
})

describe('isStorageFull', () => {
  it('knows a full file system, a quota, a full SQLite file and PostgreSQL disk_full (53100)', () => {
    for (const code of ['ENOSPC', 'EDQUOT', 'SQLITE_FULL', '53100'])
      expect(isStorageFull(withCode(code)), code).toBe(true)
  })

  it('leaves other errors alone (an I/O error or a lost connection is not a full disk)', () => {
    for (const code of ['EIO', 'EROFS', 'SQLITE_IOERR', '53200', '57P01', 'SQLITE_BUSY'])
      expect(isStorageFull(withCode(code)), code).toBe(false)
    expect(isStorageFull(new Error('no space left on device'))).toBe(false)
    expect(isStorageFull(null)).toBe(false)
  })
})

describe.runIf(process.env.TEST_DATABASE === 'postgres')(
  'a statement past statement_timeout',
  () => {
    let store: Store
    beforeAll(async () => {
      store = await openTestStore()
    })
    afterAll(async () => store?.close())

    it('fails with an error answered 503, not 500 (COFFER_PG_STATEMENT_TIMEOUT_MS)', async () => {
      const failure = await store.db
        .transaction()
        .execute(async (trx) => {
          await sql`set local statement_timeout = 50`.execute(trx)
          await sql`select pg_sleep(2)`.execute(trx)
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        )
      expect((failure as { code?: string }).code).toBe('57014')
      expect(isDatabaseUnavailable(failure)).toBe(true)
    })
  },
)
