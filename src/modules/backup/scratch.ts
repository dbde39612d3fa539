import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { FsBlobStore } from '../../blob/fs-blob-store.js'
import { openStore, type StoreOptions } from '../../store/db.js'
import type { Executor } from '../../store/executor.js'
import { migrateTo, migrateToLatest } from '../../store/migrate.js'
import { SQLITE_FILE_KEY_BYTES } from '../../store/sqlite-cipher.js'
import type { Scratch } from './backup-verify.js'
import { createSchema, currentSchema, dropSchema } from './snapshot.repo.js'

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
    // Encrypted under a throwaway key, never kept: nothing of the backup lands in clear on disk.
    const store = openStore({
      url: join(dir, 'scratch.db'),
      sqliteReadWorkers: 0,
      sqliteKey: randomBytes(SQLITE_FILE_KEY_BYTES),
    })
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
    url: withSearchPath(postgres.options.url, schema),
    pgSchema: schema,
    pg: { ...postgres.options.pg, poolSize: 2, statementTimeoutMs: 0 },
  })
  const close = async () => {
    await store.close()
    await dropSchema(postgres.admin, schema)
    await removeDir()
  }
  // Never the configured schema: a restore there would meet (or migrate) the live data.
  const inUse = await currentSchema(store.db).catch(async (error: unknown) => {
    await close()
    throw error
  })
  if (inUse !== schema) {
    await close()
    throw new Error(`the scratch store opened schema ${inUse}, not ${schema}`)
  }
  return scratch(store, blobStore, close)
}

/**
 * The URL with the scratch schema as its search_path: parameters in a URL win over the pool's
 * own options (node-postgres merges the parsed URL last), so a URL that names a search_path
 * (`options=-c search_path=…`) would otherwise point the scratch at the live schema.
 */
export function withSearchPath(url: string, schema: string): string {
  const u = new URL(url)
  const kept = (u.searchParams.get('options') ?? '').replace(/-c\s*search_path=\S+/g, '').trim()
  u.searchParams.set('options', `${kept} -c search_path=${schema}`.trim())
  return u.toString()
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
