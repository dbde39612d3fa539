import type { MasterKey } from '../../crypto/master-key.js'
import { allDataKeys, rewrapDataKey } from '../../store/data-keys.repo.js'
import type { Store } from '../../store/db.js'

/**
 * Re-wraps every data key from `current` to `next` in one transaction. Content is never
 * rewritten: it stays encrypted under the same data keys. Returns how many keys were re-wrapped.
 */
export async function rotateMasterKey(
  store: Store,
  current: MasterKey,
  next: MasterKey,
): Promise<number> {
  if (current.id === next.id) throw new Error('the new master key is the current one')
  return store.db.transaction().execute(async (trx) => {
    const records = await allDataKeys(trx)
    for (const record of records) {
      if (record.master_key_id !== current.id) {
        throw new Error(
          `data key ${record.id} is wrapped by master key ${record.master_key_id}, not the current one`,
        )
      }
      const key = current.unwrap(record.wrapped_key, `${record.account_id}\n${record.id}`)
      await rewrapDataKey(
        trx,
        record,
        next.wrap(key, `${record.account_id}\n${record.id}`),
        next.id,
      )
    }
    return records.length
  })
}
