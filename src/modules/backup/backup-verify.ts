import type { MasterKeySet } from '../../crypto/master-key-set.js'
import { BackupError, type BackupManifest, type BackupMeta } from './backup-format.js'
import { type RestoreTarget, restoreInto } from './backup-restore.js'
import type { CheckReport } from './check.js'
import { listTables } from './snapshot.repo.js'
import { digestTable } from './snapshot-frames.js'

/** A restore target that exists for one verification: a temp folder, a temp schema. */
export interface Scratch extends RestoreTarget {
  /** Brings the restored schema up to date (the check reads it through today's services). */
  migrateToLatest(): Promise<void>
  close(): Promise<void>
}

export interface VerifyReport {
  ok: boolean
  /** The first problem found (what `coffer backup verify` names when it exits non-zero). */
  problem?: string
  manifest?: BackupManifest
  check?: CheckReport
}

/**
 * `coffer backup verify` (decisions 237): the backup restored into a scratch location; every
 * restored table read back and hashed exactly as the backup hashed it (so the rows that went in
 * are the rows that were backed up); then `coffer check` over the scratch database and BLOB
 * folder: every data key unwraps, every document, attribute and BLOB decrypts. ok only if all
 * hold. The scratch is removed in every case.
 */
export async function verifyBackup(
  source: AsyncIterable<Buffer>,
  keys: MasterKeySet,
  scratchFor: (meta: BackupMeta) => Promise<Scratch>,
  check: (scratch: Scratch) => Promise<CheckReport>,
  onProgress?: (done: number) => void,
): Promise<VerifyReport> {
  let scratch: Scratch | undefined
  try {
    const { manifest } = await restoreInto(
      source,
      keys,
      async (meta) => {
        scratch = await scratchFor(meta)
        return scratch
      },
      onProgress ? { onProgress } : {},
    )
    const restored = scratch as unknown as Scratch
    const tables = await listTables(restored.store.db, restored.store.dialect)
    const names = tables.map((t) => t.name).sort()
    const listed = Object.keys(manifest.tables).sort()
    if (JSON.stringify(names) !== JSON.stringify(listed)) {
      return {
        ok: false,
        manifest,
        problem: `the restored database has tables ${names.join(', ')}; the backup lists ${listed.join(', ')}`,
      }
    }
    for (const table of tables) {
      const digest = await digestTable(restored.store.db, table)
      const want = manifest.tables[table.name]
      if (digest.rows !== want?.rows || digest.sha256 !== want.sha256) {
        return {
          ok: false,
          manifest,
          problem: `table ${table.name} restored as ${digest.rows} rows (SHA-256 ${digest.sha256}); the backup holds ${want?.rows} (${want?.sha256})`,
        }
      }
    }
    await restored.migrateToLatest()
    const report = await check(restored)
    const first = report.problems[0]
    return {
      ok: report.ok,
      manifest,
      check: report,
      ...(first ? { problem: `${first.kind}: ${first.where}: ${first.detail}` } : {}),
    }
  } catch (error) {
    if (!(error instanceof BackupError)) throw error
    return { ok: false, problem: error.message }
  } finally {
    await (scratch as Scratch | undefined)?.close()
  }
}
