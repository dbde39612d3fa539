import type { BlobStore } from '../../blob/blob-store.js'
import type { S3Config } from '../../config-storage.js'
import type { MasterKey } from '../../crypto/master-key.js'
import type { Store } from '../../store/db.js'
import type { Executor } from '../../store/executor.js'
import { type BackupLocation, describeLocation, sealFrames, writeBackup } from './backup-file.js'
import { type BackupManifest, newHeader } from './backup-format.js'
import { inSnapshot } from './snapshot.repo.js'
import { snapshotFrames } from './snapshot-frames.js'

export interface CreateInput {
  /** A store of the backup's own: its one read transaction is the snapshot. */
  snapshotStore: Store
  /** The node's store, outside the snapshot (snapshot-frames.ts: BLOBs changed meanwhile). */
  live: Executor
  blobStore: BlobStore
  /** The current master key: it wraps the backup key. */
  masterKey: MasterKey
  consentSecret?: string
  location: BackupLocation
  s3: S3Config | undefined
  onProgress?: (done: number, total: number) => void
  signal?: AbortSignal
}

export interface CreateResult {
  location: string
  bytes: number
  manifest: BackupManifest
}

/**
 * `coffer backup create` and the scheduled backup: one snapshot of the database and the BLOB
 * objects its rows name, encrypted as it streams to the file or S3 object, which exists under
 * its name only once whole (backup-file.ts).
 */
export async function createBackup(input: CreateInput): Promise<CreateResult> {
  const { header, bodyKey, id } = newHeader(input.masterKey)
  return inSnapshot(input.snapshotStore, async (snapshot) => {
    const { frames, result } = snapshotFrames({
      dialect: input.snapshotStore.dialect,
      snapshot,
      live: input.live,
      blobStore: input.blobStore,
      backupId: id,
      masterKeyId: input.masterKey.id,
      ...(input.consentSecret !== undefined ? { consentSecret: input.consentSecret } : {}),
      ...(input.onProgress ? { onProgress: input.onProgress } : {}),
      ...(input.signal ? { signal: input.signal } : {}),
    })
    const { bytes } = await writeBackup(
      input.location,
      sealFrames(header, bodyKey, frames),
      input.s3,
    )
    if (!result.manifest) throw new Error('the backup stream ended before its manifest')
    return { location: describeLocation(input.location), bytes, manifest: result.manifest }
  })
}

/** What a command prints about a backup (no values: counts, hashes, ids). */
export function backupSummary(manifest: BackupManifest) {
  return {
    backup_id: manifest.backup_id,
    created_at: manifest.created_at,
    finished_at: manifest.finished_at,
    coffer_version: manifest.coffer_version,
    database: manifest.database,
    schema_version: manifest.migrations.at(-1) ?? null,
    master_key: manifest.master_key,
    blob_store: manifest.blob_store,
    tables: Object.fromEntries(Object.entries(manifest.tables).map(([n, t]) => [n, t.rows])),
    objects: { count: manifest.objects.count, bytes: manifest.objects.bytes },
    blobs_changed_during_backup: manifest.blobs_changed_during_backup,
    consent_secret: manifest.consent_secret,
  }
}
