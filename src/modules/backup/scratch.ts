import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { FsBlobStore } from '../../blob/fs-blob-store.js'
import { openStore, type StoreOptions } from '../../store/db.js'
import type { Executor } from '../../store/executor.js'
import { migrateTo, migrateToLatest } from '../../store/migrate.js'
import type { Scratch } from './backup-verify.js'
import { createSchema, dropSchema } from './snapshot.repo.js'

/**
 * Where `coffer backup verify` restores: a fresh folder under `parent` for the BLOB objects and,
 * for a SQLite backup, the database file (opened by the store's own open function, so the file
 * is whatever the store makes of a new database); for a PostgreSQL backup a fresh schema in the
 * configured database. `close` removes all of it.
 */
export async function scratchFor(
  database: 'sqlite' | 'postgres',
  parent: string,
  postgres: { admin: Executor; options: StoreOptions } | undefined,
): Promise<Scratch> {
  const dir = await mkdtemp(join(parent, 'coffer-verify-'))
  const blobStore = new FsBlobStore(join(dir, 'blobs'))
  const removeDir = () => rm(dir, { recursive: true, force: true })
  if (database === 'sqlite') {
    const store = openStore({ url: join(dir, 'scratch.db'), sqliteReadWorkers: 0 })
    return scratch(store, blobStore, async () => {
      await store.close()
      await removeDir()
    })
  }
  if (!postgres) {
    await removeDir()
    throw new Error(
      'a PostgreSQL backup is verified in a scratch schema: set COFFER_DATABASE_URL to a PostgreSQL database',
    )
  }
  const schema = `coffer_verify_${randomBytes(6).toString('hex')}`
  await createSchema(postgres.admin, schema)
  const store = openStore({
    ...postgres.options,
    pgSchema: schema,
    pg: { ...postgres.options.pg, poolSize: 2, statementTimeoutMs: 0 },
  })
  return scratch(store, blobStore, async () => {
    await store.close()
    await dropSchema(postgres.admin, schema)
    await removeDir()
  })
}

function scratch(
  store: Scratch['store'],
  blobStore: FsBlobStore,
  close: () => Promise<void>,
): Scratch {
  return {
    store,
    blobStore,
    migrateTo: async (name) => {
      await migrateTo(store.db, name)
    },
    migrateToLatest: async () => {
      await migrateToLatest(store.db)
    },
    close,
  }
}
