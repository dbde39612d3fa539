import { once } from 'node:events'
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { PassThrough } from 'node:stream'
import type { BlobStore } from '../../blob/blob-store.js'
import type { MasterKeySet } from '../../crypto/master-key-set.js'
import { safeEqual } from '../../crypto/secrets.js'
import type { DialectName, Store } from '../../store/db.js'
import { migrations } from '../../store/migrations/index.js'
import {
  BackupError,
  type BackupManifest,
  type BackupMeta,
  type TableHeader,
} from './backup-format.js'
import { type BackupEvent, readBackup } from './backup-reader.js'
import { firstNonEmptyTable, inRestore, insertRows } from './snapshot.repo.js'

/** Where a restore puts a backup: an empty database and BLOB store. */
export interface RestoreTarget {
  store: Store
  blobStore: BlobStore
  /** Brings the empty database to the backup's schema version (store/migrate.ts migrateTo). */
  migrateTo(name: string): Promise<void>
}

export interface Authenticated {
  manifest: BackupManifest
  consentSecret?: string
  /** Rows and objects: what the restore will write (its progress total). */
  items: number
}

/**
 * A restore's first pass: the whole backup read, decrypted and checked (every chunk, table,
 * object and the manifest), nothing written anywhere. A damaged backup fails here and the
 * target is never touched.
 */
export async function authenticateBackup(
  source: AsyncIterable<Buffer>,
  keys: MasterKeySet,
  onProgress?: (bytes: number) => void,
): Promise<Authenticated> {
  let manifest: BackupManifest | undefined
  let consentSecret: string | undefined
  let bytes = 0
  for await (const event of readBackup(source, keys)) {
    if (event.kind === 'data') {
      bytes += event.bytes.length
      onProgress?.(bytes)
    } else if (event.kind === 'manifest') manifest = event.manifest
    else if (event.kind === 'secret') consentSecret = event.consentSecret
  }
  if (!manifest) throw new BackupError('the backup ends without its manifest')
  const rows = Object.values(manifest.tables).reduce((sum, t) => sum + t.rows, 0)
  return {
    manifest,
    ...(consentSecret !== undefined ? { consentSecret } : {}),
    items: rows + manifest.objects.count,
  }
}

/**
 * Refuses a backup this Coffer cannot restore into `dialect`: another engine, or a schema
 * version this Coffer does not know (a backup of a newer release).
 */
export function assertRestorable(meta: BackupMeta, dialect: DialectName): void {
  if (meta.database !== dialect) {
    throw new BackupError(
      `this is a backup of a ${meta.database} database; the configured database is ${dialect}`,
    )
  }
  const known = Object.keys(migrations)
  const unknown = meta.migrations.find((name, i) => known[i] !== name)
  if (unknown !== undefined || meta.migrations.length === 0) {
    throw new BackupError(
      `this backup's schema version (${meta.migrations.at(-1) ?? 'none'}, Coffer ${meta.coffer_version}) is not one this Coffer knows: restore it with that release or a later one`,
    )
  }
}

/** Why the target is not empty, or undefined when it is (nothing in the database or the store). */
export async function targetProblem(
  store: Store | undefined,
  blobStore: BlobStore,
): Promise<string | undefined> {
  const table = store ? await firstNonEmptyTable(store.db, store.dialect) : undefined
  if (table !== undefined) {
    return `the target database is not empty (table ${table} holds rows): restore into a new database`
  }
  for await (const object of blobStore.list('a/')) {
    return `the target BLOB store is not empty (it holds ${object.key}): restore into an empty one`
  }
  return undefined
}

/** Where the consent secret lives on this node (loadConsentSecret's settings). */
export interface ConsentSecretPlace {
  /** COFFER_CONSENT_JWT_SECRET. */
  fromEnvironment: string | undefined
  file: string
}

/**
 * The consent secret in the backup (generated on SQLite, in the data folder) must be the one
 * this node will use: consent records are found and opened with it. A different one configured
 * is refused before anything is written.
 */
export function consentSecretProblem(
  place: ConsentSecretPlace,
  secret: string | undefined,
): string | undefined {
  if (secret === undefined) return undefined
  const configured = place.fromEnvironment ?? readSecretFile(place.file)
  if (configured === undefined || safeEqual(configured, secret)) return undefined
  const where = place.fromEnvironment !== undefined ? 'COFFER_CONSENT_JWT_SECRET' : place.file
  return `the consent secret in ${where} is not the backup's (its consent records open only with the backup's): remove it, or restore elsewhere`
}

/** Writes the backup's consent secret file where none is configured (mode 0600, atomic). */
export function restoreConsentSecret(
  place: ConsentSecretPlace,
  secret: string | undefined,
): boolean {
  if (secret === undefined || place.fromEnvironment !== undefined || existsSync(place.file)) {
    return false
  }
  const temp = `${place.file}.${process.pid}.tmp`
  rmSync(temp, { force: true })
  writeFileSync(temp, `${secret}\n`, { mode: 0o600, flag: 'wx' })
  renameSync(temp, place.file)
  return true
}

function readSecretFile(file: string): string | undefined {
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined
}

/**
 * Pours a backup into an empty target: the database is migrated to the backup's schema
 * version, then every row goes in within one transaction (`wrap` runs around it: the audit
 * trail's context on a real restore) and every object into the BLOB store. On any failure the
 * transaction rolls back and every object written is deleted again. The caller brings the
 * schema up to date afterwards.
 */
export async function restoreInto(
  source: AsyncIterable<Buffer>,
  keys: MasterKeySet,
  targetFor: (meta: BackupMeta) => Promise<RestoreTarget>,
  options: {
    onProgress?: (done: number) => void
    wrap?: <T>(fn: () => Promise<T>) => Promise<T>
  } = {},
): Promise<{ manifest: BackupManifest; target: RestoreTarget }> {
  const events = readBackup(source, keys)
  const first = await events.next()
  if (first.done || first.value.kind !== 'meta') {
    throw new BackupError('the backup does not start with its meta')
  }
  const meta = first.value.meta
  const target = await targetFor(meta)
  assertRestorable(meta, target.store.dialect)
  await target.migrateTo(meta.migrations.at(-1) as string)
  const wrap = options.wrap ?? ((fn) => fn())
  let wroteObjects = false
  try {
    const manifest = await wrap(() =>
      inRestore(target.store, async (trx) => {
        let table: TableHeader | undefined
        let upload: Upload | undefined
        let done = 0
        let found: BackupManifest | undefined
        const rest: AsyncIterable<BackupEvent> = { [Symbol.asyncIterator]: () => events }
        for await (const event of rest) {
          switch (event.kind) {
            case 'table':
              table = event.table
              break
            case 'rows':
              await insertRows(trx, event.table.name, event.table.columns, event.rows)
              done += event.rows.length
              options.onProgress?.(done)
              break
            case 'object':
              wroteObjects = true
              upload = startUpload(target.blobStore, event.key)
              break
            case 'data':
              await (upload as Upload).write(event.bytes)
              break
            case 'object-end':
              await (upload as Upload).end(event.size)
              upload = undefined
              options.onProgress?.(++done)
              break
            case 'manifest':
              found = event.manifest
              break
            default:
              break
          }
        }
        if (!found || table === undefined) throw new BackupError('the backup holds no tables')
        return found
      }),
    )
    return { manifest, target }
  } catch (error) {
    if (wroteObjects) await removeEveryObject(target.blobStore)
    throw error
  }
}

interface Upload {
  write(bytes: Buffer): Promise<void>
  end(size: number): Promise<void>
}

/** One object streamed into the store as its frames arrive (bounded by the stream's buffer). */
function startUpload(store: BlobStore, key: string): Upload {
  const body = new PassThrough()
  const stored = store.put(key, body)
  stored.catch(() => {})
  return {
    async write(bytes) {
      if (!body.write(bytes)) await Promise.race([once(body, 'drain'), stored])
    },
    async end(size) {
      body.end()
      const result = await stored
      if (result.size !== size) {
        throw new Error(`object ${key}: ${result.size} bytes stored of ${size}`)
      }
    },
  }
}

/** The target store was empty before the restore: what it holds now is the restore's. */
async function removeEveryObject(store: BlobStore): Promise<void> {
  const keys: string[] = []
  for await (const object of store.list('a/')) keys.push(object.key)
  for (const key of keys) await store.delete(key).catch(() => {})
}
