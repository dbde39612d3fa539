import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openTestStore } from '../../test/helpers/store.js'
import { openStore, type Store } from './db.js'
import type { Executor } from './executor.js'
import { migrateToLatest } from './migrate.js'
import { precompiled, precompiledList } from './precompiled.js'
import type { UsersTable } from './schema.js'

const A1 = '00000000-0000-7000-8000-0000000000a1'
const A2 = '00000000-0000-7000-8000-0000000000a2'
const T = '2025-01-01T00:00:00.000Z'

function user(accountId: string, id: string, username: string, status: string): UsersTable {
  return {
    account_id: accountId,
    id,
    username,
    status,
    password_hash: null,
    attributes: '{}',
    mfa_enrolled: 0,
    access_key_digest: null,
    secret_key_digest: null,
    created_at: T,
    updated_at: T,
  }
}

/** Users in two accounts; the same names recur across accounts and statuses. */
const USERS = [
  user(A1, 'u1', 'alice', 'ACTIVATED'),
  user(A1, 'u2', 'bob', 'LOCKED'),
  user(A1, 'u3', 'carol', 'PENDING'),
  user(A1, 'u4', 'alice', 'DEACTIVATED'),
  user(A2, 'u1', 'alice', 'ACTIVATED'),
  user(A2, 'u5', 'bob', 'DEACTIVATED'),
  user(A2, 'u6', 'dave', 'LOCKED'),
]

const ids = (rows: readonly { id: string }[]) => rows.map((r) => r.id).sort()

/**
 * The same checks on every dialect. Each suite makes its own precompiled queries: a query
 * compiles once, on its first call, for the dialect of that call.
 */
function precompiledSuite(open: () => Promise<Store>): void {
  let store: Store

  beforeAll(async () => {
    store = await open()
    await store.db
      .insertInto('accounts')
      .values([
        { id: A1, created_at: T },
        { id: A2, created_at: T },
      ])
      .execute()
    await store.db.insertInto('users').values(USERS).execute()
  })

  afterAll(async () => {
    await store?.close()
  })

  it('binds arguments declared in a different order than the SQL uses them', async () => {
    let builds = 0
    // Declared (username, accountId); the SQL binds account_id first.
    const byName = precompiled((db: Executor, username: string, accountId: string) => {
      builds++
      return db
        .selectFrom('users')
        .select(['account_id', 'id', 'username'])
        .where('account_id', '=', accountId)
        .where('username', '=', username)
        .orderBy('id')
    })
    expect(ids(await byName(store.db, 'alice', A1))).toEqual(['u1', 'u4'])
    expect(ids(await byName(store.db, 'alice', A2))).toEqual(['u1'])
    expect(ids(await byName(store.db, 'bob', A2))).toEqual(['u5'])
    expect(ids(await byName(store.db, 'dave', A1))).toEqual([])
    // Swapped values find nothing (account ids are not names).
    expect(await byName(store.db, A1, 'alice')).toEqual([])
    const rows = await byName(store.db, 'bob', A1)
    expect(rows).toEqual([{ account_id: A1, id: 'u2', username: 'bob' }])
    expect(builds).toBe(1)
  })

  it('keeps constant values inside the query', async () => {
    const live = precompiled((db: Executor, accountId: string, username: string) =>
      db
        .selectFrom('users')
        .select(['id', 'status'])
        .where('status', 'in', ['ACTIVATED', 'LOCKED'])
        .where('account_id', '=', accountId)
        .where('username', '!=', 'zed')
        .where('username', '=', username)
        .where('mfa_enrolled', '=', 0)
        .limit(5),
    )
    expect(await live(store.db, A1, 'alice')).toEqual([{ id: 'u1', status: 'ACTIVATED' }])
    expect(await live(store.db, A1, 'bob')).toEqual([{ id: 'u2', status: 'LOCKED' }])
    expect(await live(store.db, A1, 'carol')).toEqual([])
    expect(await live(store.db, A2, 'bob')).toEqual([])
    expect(await live(store.db, A2, 'dave')).toEqual([{ id: 'u6', status: 'LOCKED' }])
    // The constants are still there on later calls, not overwritten by arguments.
    expect(await live(store.db, A2, 'alice')).toEqual([{ id: 'u1', status: 'ACTIVATED' }])
  })

  it('keeps a constant equal to an argument value apart from the argument', async () => {
    const withStatus = precompiled((db: Executor, status: string) =>
      db
        .selectFrom('users')
        .select('id')
        .where('account_id', '=', A1)
        .where((eb) => eb.or([eb('status', '=', status), eb('status', '=', 'PENDING')])),
    )
    expect(ids(await withStatus(store.db, 'PENDING'))).toEqual(['u3'])
    expect(ids(await withStatus(store.db, 'LOCKED'))).toEqual(['u2', 'u3'])
    expect(ids(await withStatus(store.db, 'ACTIVATED'))).toEqual(['u1', 'u3'])
  })

  it('returns the right rows on every call (no stale parameters)', async () => {
    const byId = precompiled((db: Executor, accountId: string, id: string) =>
      db.selectFrom('users').selectAll().where('account_id', '=', accountId).where('id', '=', id),
    )
    for (let round = 0; round < 3; round++) {
      for (const expected of USERS) {
        const rows = await byId(store.db, expected.account_id, expected.id)
        expect(rows).toEqual([expected])
      }
    }
    expect(await byId(store.db, A2, 'u2')).toEqual([])
    expect(await byId(store.db, A1, 'u1')).toEqual([USERS[0]])
  })

  it('keeps concurrent calls apart', async () => {
    const byId = precompiled((db: Executor, accountId: string, id: string) =>
      db
        .selectFrom('users')
        .select(['account_id', 'id'])
        .where('account_id', '=', accountId)
        .where('id', '=', id),
    )
    const results = await Promise.all(USERS.map((u) => byId(store.db, u.account_id, u.id)))
    expect(results).toEqual(USERS.map((u) => [{ account_id: u.account_id, id: u.id }]))
  })

  it('binds an argument used more than once everywhere it appears', async () => {
    const nameOrId = precompiled((db: Executor, accountId: string, key: string) =>
      db
        .selectFrom('users')
        .select('id')
        .where('account_id', '=', accountId)
        .where((eb) => eb.or([eb('id', '=', key), eb('username', '=', key)])),
    )
    expect(ids(await nameOrId(store.db, A1, 'u2'))).toEqual(['u2'])
    expect(ids(await nameOrId(store.db, A1, 'alice'))).toEqual(['u1', 'u4'])
    expect(ids(await nameOrId(store.db, A2, 'u6'))).toEqual(['u6'])
  })

  it('passes hostile text as data', async () => {
    const byName = precompiled((db: Executor, username: string) =>
      db.selectFrom('users').select('id').where('username', '=', username),
    )
    expect(await byName(store.db, "' or '1'='1")).toEqual([])
    expect(await byName(store.db, 'alice; drop table users; --')).toEqual([])
    expect(ids(await byName(store.db, 'carol'))).toEqual(['u3'])
  })

  it('works with a transaction executor, seeing its uncommitted rows', async () => {
    const byId = precompiled((db: Executor, accountId: string, id: string) =>
      db
        .selectFrom('users')
        .select(['id', 'username'])
        .where('account_id', '=', accountId)
        .where('id', '=', id),
    )
    // First call (and compilation) inside a transaction.
    await store.db.transaction().execute(async (trx) => {
      expect(await byId(trx, A1, 'u2')).toEqual([{ id: 'u2', username: 'bob' }])
      await trx
        .insertInto('users')
        .values(user(A1, 'tx1', 'erin', 'PENDING'))
        .execute()
      expect(await byId(trx, A1, 'tx1')).toEqual([{ id: 'tx1', username: 'erin' }])
    })
    expect(await byId(store.db, A1, 'tx1')).toEqual([{ id: 'tx1', username: 'erin' }])

    // A rolled-back transaction's row is seen inside it only.
    const rollback = new Error('rollback')
    await expect(
      store.db.transaction().execute(async (trx) => {
        await trx
          .insertInto('users')
          .values(user(A2, 'tx2', 'frank', 'PENDING'))
          .execute()
        expect(await byId(trx, A2, 'tx2')).toEqual([{ id: 'tx2', username: 'frank' }])
        throw rollback
      }),
    ).rejects.toBe(rollback)
    expect(await byId(store.db, A2, 'tx2')).toEqual([])

    await store.db.deleteFrom('users').where('id', '=', 'tx1').execute()
    expect(await byId(store.db, A1, 'tx1')).toEqual([])
  })

  it('runs writes with returning, binding values in SET and WHERE', async () => {
    const setStatus = precompiled((db: Executor, status: string, accountId: string, id: string) =>
      db
        .updateTable('users')
        .set({ status, updated_at: '2025-02-02T00:00:00.000Z' })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .returning(['id', 'status', 'updated_at']),
    )
    expect(await setStatus(store.db, 'LOCKED', A1, 'u3')).toEqual([
      { id: 'u3', status: 'LOCKED', updated_at: '2025-02-02T00:00:00.000Z' },
    ])
    expect(await setStatus(store.db, 'PENDING', A1, 'u3')).toEqual([
      { id: 'u3', status: 'PENDING', updated_at: '2025-02-02T00:00:00.000Z' },
    ])
    expect(await setStatus(store.db, 'PENDING', A2, 'u3')).toEqual([])
    await store.db.updateTable('users').set({ updated_at: T }).where('id', '=', 'u3').execute()
  })

  it('reads outside an open transaction see only committed rows, and wait for nothing else', async () => {
    const byId = precompiled((db: Executor, accountId: string, id: string) =>
      db.selectFrom('users').select('id').where('account_id', '=', accountId).where('id', '=', id),
    )
    let inside!: () => void
    const release = new Promise<void>((resolve) => {
      inside = resolve
    })
    let entered!: () => void
    const started = new Promise<void>((resolve) => {
      entered = resolve
    })
    const tx = store.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('users')
        .values(user(A1, 'tx3', 'gina', 'PENDING'))
        .execute()
      entered()
      await release
      throw new Error('rollback')
    })
    await started
    // The transaction holds the connection: the read waits for it (and never sees its row).
    const during = byId(store.db, A1, 'tx3')
    let settled = false
    void during.then(() => {
      settled = true
    })
    await new Promise((r) => setTimeout(r, 20))
    expect(settled).toBe(store.dialect === 'postgres')
    inside()
    await expect(tx).rejects.toThrow('rollback')
    expect(await during).toEqual([])
    expect(await byId(store.db, A1, 'tx3')).toEqual([])
  })

  it('runs a write through the store, whose rights feed hears of it', async () => {
    const touch = precompiled((db: Executor, accountId: string, id: string) =>
      db
        .updateTable('users')
        .set({ updated_at: T })
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .returning('id'),
    )
    const before = store.rights.epoch
    expect(await touch(store.db, A1, 'u1')).toEqual([{ id: 'u1' }])
    expect(store.rights.epoch).toBeGreaterThan(before)
  })

  it('binds in-lists of every length, and builds a list longer than its bound as usual', async () => {
    let builds = 0
    const byIds = precompiledList(3, (db: Executor, [accountId]: [string], list: string[]) => {
      builds++
      return db
        .selectFrom('users')
        .select('id')
        .where('account_id', '=', accountId)
        .where('id', 'in', list)
    })
    expect(ids(await byIds(store.db, [A1], ['u1']))).toEqual(['u1'])
    expect(ids(await byIds(store.db, [A1], ['u2', 'u1']))).toEqual(['u1', 'u2'])
    expect(ids(await byIds(store.db, [A1], ['u2', 'u3', 'u5']))).toEqual(['u2', 'u3'])
    expect(ids(await byIds(store.db, [A2], ['u2', 'u5']))).toEqual(['u5'])
    expect(ids(await byIds(store.db, [A1], ['u1', 'u2', 'u3', 'u4']))).toEqual([
      'u1',
      'u2',
      'u3',
      'u4',
    ])
    expect(ids(await byIds(store.db, [A1], ['u3', 'u4', 'u1', 'u2']))).toEqual([
      'u1',
      'u2',
      'u3',
      'u4',
    ])
    // Lengths 1, 2 and 3 compiled once each; the two lists of 4 were built each time.
    expect(builds).toBe(5)
  })

  it('throws when the builder does not use an argument', async () => {
    const unused = precompiled((db: Executor, accountId: string, _id: string) =>
      db.selectFrom('users').select('id').where('account_id', '=', accountId),
    )
    await expect(unused(store.db, A1, 'u1')).rejects.toThrow(/does not use every argument/)
    // Still refuses on later calls (it never caches a broken query).
    await expect(unused(store.db, A1, 'u1')).rejects.toThrow(/does not use every argument/)
  })

  it('throws when the builder transforms an argument instead of binding it', async () => {
    const prefix = precompiled((db: Executor, name: string) =>
      db.selectFrom('users').select('id').where('username', 'like', `${name}%`),
    )
    await expect(prefix(store.db, 'al')).rejects.toThrow(/does not use every argument/)
  })
}

describe('precompiled on SQLite', () => {
  precompiledSuite(async () => {
    const store = openStore({ url: ':memory:' })
    await migrateToLatest(store.db)
    return store
  })
})

describe.runIf(process.env.TEST_DATABASE === 'postgres')('precompiled on PostgreSQL', () => {
  precompiledSuite(async () => {
    const store = await openTestStore()
    expect(store.dialect).toBe('postgres')
    return store
  })
})

/** The users of the account A1, in a migrated store of their own. */
async function seeded(open: () => Promise<Store>): Promise<Store> {
  const store = await open()
  await store.db.insertInto('accounts').values({ id: A1, created_at: T }).execute()
  await store.db
    .insertInto('users')
    .values(USERS.filter((u) => u.account_id === A1))
    .execute()
  return store
}

const sqliteStore = async () => {
  const store = openStore({ url: ':memory:' })
  await migrateToLatest(store.db)
  return store
}

describe('precompiled on several databases in one process', () => {
  it('compiles once per database, its transactions included', async () => {
    let builds = 0
    const byName = precompiled((db: Executor, accountId: string, username: string) => {
      builds++
      return db
        .selectFrom('users')
        .select('id')
        .where('account_id', '=', accountId)
        .where('username', '=', username)
    })
    const first = await seeded(sqliteStore)
    const second = await seeded(sqliteStore)
    try {
      await second.db
        .insertInto('users')
        .values(user(A1, 'u9', 'zoe', 'ACTIVATED'))
        .execute()
      expect(ids(await byName(first.db, A1, 'alice'))).toEqual(['u1', 'u4'])
      expect(await byName(first.db, A1, 'zoe')).toEqual([])
      expect(ids(await byName(second.db, A1, 'zoe'))).toEqual(['u9'])
      await second.db.transaction().execute(async (trx) => {
        expect(ids(await byName(trx, A1, 'bob'))).toEqual(['u2'])
      })
      expect(ids(await byName(first.db, A1, 'carol'))).toEqual(['u3'])
      expect(builds).toBe(2)
    } finally {
      await first.close()
      await second.close()
    }
  })

  // Each engine has its own parameter syntax (`?` and `$1`): a query compiled for one cannot run
  // on the other.
  it.runIf(process.env.TEST_DATABASE === 'postgres')(
    'runs the same query on SQLite and PostgreSQL alternately',
    async () => {
      const byName = precompiled((db: Executor, accountId: string, username: string) =>
        db
          .selectFrom('users')
          .select(['id', 'status'])
          .where('account_id', '=', accountId)
          .where('username', '=', username)
          .where('status', '!=', 'DEACTIVATED'),
      )
      const sqlite = await seeded(sqliteStore)
      const postgres = await seeded(openTestStore)
      try {
        expect(postgres.dialect).toBe('postgres')
        await postgres.db
          .updateTable('users')
          .set({ status: 'LOCKED' })
          .where('id', '=', 'u1')
          .execute()
        for (let round = 0; round < 2; round++) {
          expect(await byName(sqlite.db, A1, 'alice')).toEqual([{ id: 'u1', status: 'ACTIVATED' }])
          expect(await byName(postgres.db, A1, 'alice')).toEqual([{ id: 'u1', status: 'LOCKED' }])
          await postgres.db.transaction().execute(async (trx) => {
            expect(await byName(trx, A1, 'bob')).toEqual([{ id: 'u2', status: 'LOCKED' }])
          })
          expect(await byName(sqlite.db, A1, 'carol')).toEqual([{ id: 'u3', status: 'PENDING' }])
        }
      } finally {
        await sqlite.close()
        await postgres.close()
      }
    },
  )
})
