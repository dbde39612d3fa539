import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openTestStore, testDialect } from '../../test/helpers/store.js'
import { AppError } from '../lib/errors.js'
import type { Store } from './db.js'
import { Deadline, runWithDeadline } from './request-deadline.js'

/** The store holds a request to its deadline: on SQLite and on PostgreSQL (TEST_DATABASE). */
describe(`request deadline in the store (${testDialect})`, () => {
  let store: Store
  beforeAll(async () => {
    store = await openTestStore()
    await sql`create table deadline_probe (n integer)`.execute(store.db)
  })
  afterAll(async () => store?.close())

  const count = async () =>
    Number(
      (await sql<{ c: number }>`select count(*) as c from deadline_probe`.execute(store.db)).rows[0]
        ?.c,
    )

  it('refuses a statement past the deadline and rolls its transaction back', async () => {
    const deadline = new Deadline(100)
    const work = runWithDeadline(deadline, () =>
      store.db.transaction().execute(async (trx) => {
        await sql`insert into deadline_probe values (1)`.execute(trx)
        await sleep(200)
        await sql`insert into deadline_probe values (2)`.execute(trx)
      }),
    )
    const error = await work.catch((e: unknown) => e)
    deadline.clear()
    expect(error).toBeInstanceOf(AppError)
    expect(error).toMatchObject({ statusCode: 503, code: 'REQUEST_TIMEOUT' })
    expect(await count()).toBe(0)
  })

  it('runs work within its deadline, and work outside any request has none', async () => {
    const deadline = new Deadline(10_000)
    await runWithDeadline(deadline, () =>
      sql`insert into deadline_probe values (3)`.execute(store.db),
    )
    deadline.clear()
    await sleep(5)
    await sql`insert into deadline_probe values (4)`.execute(store.db)
    expect(await count()).toBe(2)
    await sql`delete from deadline_probe`.execute(store.db)
  })

  it.skipIf(testDialect !== 'postgres')(
    'cancels a statement still running when the deadline passes (PostgreSQL)',
    async () => {
      const deadline = new Deadline(300)
      const started = Date.now()
      const error = await runWithDeadline(deadline, () =>
        store.db.transaction().execute(async (trx) => {
          await sql`insert into deadline_probe values (5)`.execute(trx)
          await sql`select pg_sleep(10)`.execute(trx)
        }),
      ).catch((e: unknown) => e)
      expect(error).toMatchObject({ statusCode: 503, code: 'REQUEST_TIMEOUT' })
      expect(Date.now() - started).toBeLessThan(5000)
      expect(await count()).toBe(0)
    },
  )

  it.skipIf(testDialect !== 'postgres')(
    'sets statement_timeout on every pooled connection (PostgreSQL)',
    async () => {
      const { rows } = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(
        store.db,
      )
      expect(rows[0]?.statement_timeout).toBe('30s')
    },
  )
})
