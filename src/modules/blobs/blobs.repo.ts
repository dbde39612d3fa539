import type { Selectable, Updateable } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import type { BlobsTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'

export type BlobRow = Selectable<BlobsTable>
export type BlobPatch = Updateable<BlobsTable>

export async function insert(db: Executor, row: BlobRow): Promise<void> {
  await db.insertInto('blobs').values(row).execute()
}

export function findById(db: Executor, accountId: string, vaultId: string, id: string) {
  return db
    .selectFrom('blobs')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
    .executeTakeFirst()
}

function filtered(db: Executor, accountId: string, vaultId: string, scopes: readonly ItemScope[]) {
  return db
    .selectFrom('blobs')
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where((eb) => scopePredicate(eb, scopes, 'id', 'owner_id'))
}

export function list(
  db: Executor,
  accountId: string,
  vaultId: string,
  scopes: readonly ItemScope[],
  limit: number,
  offset: number,
) {
  return filtered(db, accountId, vaultId, scopes)
    .selectAll()
    .orderBy('id')
    .limit(limit)
    .offset(offset)
    .execute()
}

export async function count(
  db: Executor,
  accountId: string,
  vaultId: string,
  scopes: readonly ItemScope[],
) {
  const row = await filtered(db, accountId, vaultId, scopes)
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/**
 * Updates the row only if its object is still `expectedObject`: two concurrent replacements
 * cannot both win, and the loser's object is cleaned up by its own request.
 */
export async function update(
  db: Executor,
  accountId: string,
  vaultId: string,
  id: string,
  expectedObject: string,
  patch: BlobPatch,
): Promise<boolean> {
  const result = await db
    .updateTable('blobs')
    .set(patch)
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
    .where('object_key', '=', expectedObject)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

export async function remove(
  db: Executor,
  accountId: string,
  vaultId: string,
  id: string,
): Promise<boolean> {
  const result = await db
    .deleteFrom('blobs')
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
    .executeTakeFirst()
  return Number(result.numDeletedRows) === 1
}

/** Re-encryption: the account's BLOBs by id after `after` whose stream key is not under `keyId`. */
export function listNotUnderKey(
  db: Executor,
  accountId: string,
  keyId: string,
  after: string | undefined,
  limit: number,
) {
  let query = db
    .selectFrom('blobs')
    .select(['vault_id', 'id', 'object_key', 'content_key'])
    .where('account_id', '=', accountId)
    .where('content_key', 'not like', `c1.${keyId}.%`)
  if (after !== undefined) query = query.where('id', '>', after)
  return query.orderBy('id').limit(limit).execute()
}
