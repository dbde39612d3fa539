import type { DataKeyRecord } from '../../crypto/keyring.js'
import type { MasterKeySet } from '../../crypto/master-key-set.js'
import {
  countDataKeysByMasterKey,
  dataKeysNotUnder,
  rewrapDataKey,
} from '../../store/data-keys.repo.js'
import type { Store } from '../../store/db.js'
import { withWriteRetry } from './write-retry.js'

/** Data keys re-wrapped per transaction: each holds the SQLite write lock for milliseconds. */
export const REWRAP_BATCH_SIZE = 100
/** Passes over the table at most (the later ones only find keys written during the first). */
const MAX_PASSES = 3

export interface RotationProgress {
  /** Data keys re-wrapped so far by this run. */
  rewrapped: number
  /** Data keys not under the current key when the run began. */
  total: number
}

export interface RotationReport {
  /** Data keys this run moved under the current master key. */
  rewrapped: number
  /** Data keys no key held opens (left as they are; they name the key they need). */
  unopenable: { account_id: string; id: string; master_key: string }[]
  /** Data keys per master key after the run (fingerprint, or `legacy:<id>` on old rows). */
  byMasterKey: Record<string, number>
  /** Data keys still wrapped by a key other than the current one. */
  notUnderCurrent: number
}

/**
 * Re-wraps every data key that the current master key does not wrap yet, while servers keep
 * serving: batches of REWRAP_BATCH_SIZE keys, each read outside any transaction and written in a
 * short one (retried when another writer holds the lock), each update conditional on the row
 * still holding what was read. Content is never rewritten: it stays under the same data keys,
 * which the servers' caches keep. Killed at any point, a new run re-wraps just what is left.
 */
export async function rotateMasterKey(
  store: Store,
  keys: MasterKeySet,
  options: { batchSize?: number; onProgress?: (progress: RotationProgress) => void } = {},
): Promise<RotationReport> {
  const batchSize = options.batchSize ?? REWRAP_BATCH_SIZE
  const current = keys.current
  const initial = await countDataKeysByMasterKey(store.db)
  const total = [...initial].reduce((sum, [name, n]) => (name === current.id ? sum : sum + n), 0)
  const unopenable: RotationReport['unopenable'] = []
  let rewrapped = 0
  // A node that has not picked up the new key yet may wrap a new account's data key under the
  // old one behind the cursor: further passes take those (a few at most), then the report says
  // what is left.
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    const sofar = rewrapped
    await rewrapPass()
    if (rewrapped === sofar) break
  }
  const counts = await countDataKeysByMasterKey(store.db)
  let notUnderCurrent = 0
  for (const [name, n] of counts) if (name !== current.id) notUnderCurrent += n
  return { rewrapped, unopenable, byMasterKey: Object.fromEntries(counts), notUnderCurrent }

  async function rewrapPass(): Promise<void> {
    unopenable.length = 0
    let after: DataKeyRecord | undefined
    for (;;) {
      const batch = await dataKeysNotUnder(store.db, current.id, after, batchSize)
      if (batch.length === 0) break
      after = batch[batch.length - 1]
      const updates: { record: DataKeyRecord; wrapped: string }[] = []
      for (const record of batch) {
        let key: Buffer
        try {
          key = keys.unwrap(record).key
        } catch {
          unopenable.push({
            account_id: record.account_id,
            id: record.id,
            master_key: record.master_key_fingerprint ?? `legacy:${record.master_key_id}`,
          })
          continue
        }
        updates.push({ record, wrapped: current.wrap(key, `${record.account_id}\n${record.id}`) })
      }
      if (updates.length > 0) {
        rewrapped += await withWriteRetry(() =>
          store.db.transaction().execute(async (trx) => {
            let n = 0
            for (const u of updates) {
              if (await rewrapDataKey(trx, u.record, u.wrapped, current.id)) n += 1
            }
            return n
          }),
        )
      }
      options.onProgress?.({ rewrapped, total })
    }
  }
}
