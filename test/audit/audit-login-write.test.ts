import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, createUser, type TestApp } from '../helpers/app.js'
import { testDialect } from '../helpers/store.js'

/**
 * An access token is two rows (the credential directory's and the credential's). Its event
 * commits with its write: the two must commit together, or a token half-written (the second
 * insert refused) leaves an event saying the login succeeded while it answered an error.
 */
let t: TestApp
beforeAll(async () => {
  t = await buildTestApp()
})
afterAll(() => t.close())

async function refuseCredentialInserts(on: boolean) {
  const db = t.deps.store.db
  if (testDialect === 'postgres') {
    if (on) {
      await sql`create or replace function refuse_credential() returns trigger as $$
        begin raise exception 'refused for the test'; end $$ language plpgsql`.execute(db)
      await sql`create trigger refuse_credential before insert on credentials
        for each row execute function refuse_credential()`.execute(db)
    } else {
      await sql`drop trigger refuse_credential on credentials`.execute(db)
    }
  } else if (on) {
    await sql`create trigger refuse_credential before insert on credentials
      begin select raise(abort, 'refused for the test'); end`.execute(db)
  } else {
    await sql`drop trigger refuse_credential`.execute(db)
  }
}

describe(`a login whose token cannot be stored (${testDialect})`, () => {
  it('leaves one event with the answered status, and no half-written token', async () => {
    const user = await createUser(t, { password: 'a-long-password-1' })
    const directory = async () =>
      Number(
        (
          await t.deps.store.db
            .selectFrom('credential_directory')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    const before = await directory()
    await refuseCredentialInserts(true)
    let res: Awaited<ReturnType<typeof t.api.post>>
    try {
      res = await t.api.post('/v1/auth/login', {
        form: {
          account_id: t.admin.account_id,
          username: user.username,
          password: 'a-long-password-1',
        },
      })
    } finally {
      await refuseCredentialInserts(false)
    }
    expect(res.statusCode, res.body).toBeGreaterThanOrEqual(500)
    const events = await t.deps.store.db
      .selectFrom('audit_events')
      .select(['status', 'decision'])
      .where('transaction_id', '=', res.json().transaction_id)
      .execute()
    expect(events).toEqual([{ status: res.statusCode, decision: 'error' }])
    expect(await directory()).toBe(before)
  })
})
