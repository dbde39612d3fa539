import type { DataKeyRecord } from '../../crypto/keyring.js'
import type { MasterKeySet } from '../../crypto/master-key-set.js'
import { setFingerprint } from '../../store/data-keys.repo.js'
import type { Store } from '../../store/db.js'
import { withWriteRetry } from './write-retry.js'

/** Rows given their fingerprint per transaction. */
const BACKFILL_BATCH_SIZE = 100

/**
 * The backfill of migration 0019, which cannot compute fingerprints itself (they need the master
 * key): each data key without a fingerprint gets the one of the key held that opens it. Rows no
 * key held opens stay NULL (Keyring.assertUnlocks has refused to start on such a database unless
 * their legacy id names a key held). Idempotent, in short batches: nodes starting together
 * write the same values. Returns how many rows were filled.
 */
export async function backfillFingerprints(store: Store, keys: MasterKeySet): Promise<number> {
  let filled = 0
  let after: DataKeyRecord | undefined
  for (;;) {
    let query = store.db
      .selectFrom('data_keys')
      .selectAll()
      .where('master_key_fingerprint', 'is', null)
    if (after) {
      const { account_id, id } = after
      query = query.where((eb) =>
        eb.or([
          eb('account_id', '>', account_id),
          eb.and([eb('account_id', '=', account_id), eb('id', '>', id)]),
        ]),
      )
    }
    const batch = await query
      .orderBy('account_id')
      .orderBy('id')
      .limit(BACKFILL_BATCH_SIZE)
      .execute()
    if (batch.length === 0) return filled
    after = batch[batch.length - 1]
    const found: { record: DataKeyRecord; fingerprint: string }[] = []
    for (const record of batch) {
      try {
        found.push({ record, fingerprint: keys.unwrap(record).by.id })
      } catch {
        // Not opened by any key held: left for an operator holding its key (rotate reports it).
      }
    }
    if (found.length === 0) continue
    await withWriteRetry(() =>
      store.db.transaction().execute(async (trx) => {
        for (const f of found) await setFingerprint(trx, f.record, f.fingerprint)
      }),
    )
    filled += found.length
  }
}
