import type { DataKeyRecord, DataKeyStore } from '../crypto/keyring.js'
import type { Executor } from './executor.js'

/** The keyring's storage: wrapped data keys in the `data_keys` table. */
export function dataKeyStore(db: Executor): DataKeyStore {
  return {
    findCurrent: (accountId) =>
      db
        .selectFrom('data_keys')
        .selectAll()
        .where('account_id', '=', accountId)
        .orderBy('created_at')
        .orderBy('id')
        .limit(1)
        .executeTakeFirst(),
    findById: (accountId, id) =>
      db
        .selectFrom('data_keys')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .executeTakeFirst(),
    insert: async (record: DataKeyRecord) => {
      await db.insertInto('data_keys').values(record).execute()
    },
    listForAccount: (accountId) =>
      db
        .selectFrom('data_keys')
        .selectAll()
        .where('account_id', '=', accountId)
        .orderBy('id')
        .execute(),
    masterKeyIds: async () =>
      (await db.selectFrom('data_keys').select('master_key_id').distinct().execute()).map(
        (r) => r.master_key_id,
      ),
  }
}

/** Every data key, for re-wrapping under a new master key. */
export function allDataKeys(db: Executor): Promise<DataKeyRecord[]> {
  return db.selectFrom('data_keys').selectAll().orderBy('account_id').orderBy('id').execute()
}

export async function rewrapDataKey(
  db: Executor,
  record: DataKeyRecord,
  wrapped: string,
  masterKeyId: string,
) {
  await db
    .updateTable('data_keys')
    .set({ wrapped_key: wrapped, master_key_id: masterKeyId })
    .where('account_id', '=', record.account_id)
    .where('id', '=', record.id)
    .where('master_key_id', '=', record.master_key_id)
    .execute()
}
