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
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
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
    wrappedBy: () =>
      db
        .selectFrom('data_keys')
        .select(['master_key_id', 'master_key_fingerprint'])
        .distinct()
        .execute(),
  }
}

/**
 * The next `limit` data keys after `after` (in primary-key order) that are not yet wrapped by
 * the master key of `fingerprint`: NULL rows (before migration 0019) count as not yet.
 */
export function dataKeysNotUnder(
  db: Executor,
  fingerprint: string,
  after: { account_id: string; id: string } | undefined,
  limit: number,
): Promise<DataKeyRecord[]> {
  let query = db
    .selectFrom('data_keys')
    .selectAll()
    .where((eb) =>
      eb.or([
        eb('master_key_fingerprint', 'is', null),
        eb('master_key_fingerprint', '!=', fingerprint),
      ]),
    )
  if (after) {
    query = query.where((eb) =>
      eb.or([
        eb('account_id', '>', after.account_id),
        eb.and([eb('account_id', '=', after.account_id), eb('id', '>', after.id)]),
      ]),
    )
  }
  return query.orderBy('account_id').orderBy('id').limit(limit).execute()
}

/** How many data keys are wrapped by each master key: fingerprint (or legacy id on NULL rows). */
export async function countDataKeysByMasterKey(db: Executor): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('data_keys')
    .select(['master_key_id', 'master_key_fingerprint'])
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .groupBy(['master_key_id', 'master_key_fingerprint'])
    .execute()
  const counts = new Map<string, number>()
  for (const row of rows) {
    const name = row.master_key_fingerprint ?? `legacy:${row.master_key_id}`
    counts.set(name, (counts.get(name) ?? 0) + Number(row.n))
  }
  return counts
}

/**
 * Replaces a data key's wrapping, only if the row still holds what was read (`record`): a row
 * changed meanwhile (another rotation) is left alone and picked up by the next pass. Returns
 * whether it was replaced.
 */
export async function rewrapDataKey(
  db: Executor,
  record: DataKeyRecord,
  wrapped: string,
  fingerprint: string,
): Promise<boolean> {
  const result = await db
    .updateTable('data_keys')
    .set({ wrapped_key: wrapped, master_key_id: fingerprint, master_key_fingerprint: fingerprint })
    .where('account_id', '=', record.account_id)
    .where('id', '=', record.id)
    .where('wrapped_key', '=', record.wrapped_key)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/** Records the fingerprint of the key that opens an old row (its wrapping is unchanged). */
export async function setFingerprint(
  db: Executor,
  record: DataKeyRecord,
  fingerprint: string,
): Promise<void> {
  await db
    .updateTable('data_keys')
    .set({ master_key_id: fingerprint, master_key_fingerprint: fingerprint })
    .where('account_id', '=', record.account_id)
    .where('id', '=', record.id)
    .where('wrapped_key', '=', record.wrapped_key)
    .where('master_key_fingerprint', 'is', null)
    .execute()
}

/** Every account that has a data key (every account since encryption at rest), by id. */
export async function accountsWithDataKeys(db: Executor): Promise<string[]> {
  const rows = await db
    .selectFrom('data_keys')
    .select('account_id')
    .distinct()
    .orderBy('account_id')
    .execute()
  return rows.map((r) => r.account_id)
}
