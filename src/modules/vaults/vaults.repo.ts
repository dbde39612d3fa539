import type { Selectable } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import { precompiled } from '../../store/precompiled.js'
import type { VaultsTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'

export type VaultRow = Selectable<VaultsTable>

export async function insert(db: Executor, row: VaultRow): Promise<void> {
  await db.insertInto('vaults').values(row).execute()
}

const findByIdQuery = precompiled((db: Executor, accountId: string, id: string) =>
  db.selectFrom('vaults').selectAll().where('account_id', '=', accountId).where('id', '=', id),
)

/** Every document and BLOB request looks its vault up first (hot path). */
export async function findById(db: Executor, accountId: string, id: string) {
  const [row] = await findByIdQuery(db, accountId, id)
  return row
}

export function list(
  db: Executor,
  accountId: string,
  scopes: readonly ItemScope[],
  limit: number,
  offset: number,
) {
  return db
    .selectFrom('vaults')
    .selectAll()
    .where('account_id', '=', accountId)
    .where((eb) => scopePredicate(eb, scopes, 'id'))
    .orderBy('id')
    .limit(limit)
    .offset(offset)
    .execute()
}

export async function rename(
  db: Executor,
  accountId: string,
  id: string,
  name: string,
  at: string,
) {
  await db
    .updateTable('vaults')
    .set({ name, updated_at: at })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .execute()
}

/** True when no document, BLOB or schema lives in the vault. */
export async function isEmpty(db: Executor, accountId: string, id: string): Promise<boolean> {
  for (const table of ['documents', 'blobs', 'schemas'] as const) {
    const row = await db
      .selectFrom(table)
      .select('id')
      .where('account_id', '=', accountId)
      .where('vault_id', '=', id)
      .limit(1)
      .executeTakeFirst()
    if (row) return false
  }
  return true
}

export async function remove(db: Executor, accountId: string, id: string): Promise<void> {
  await db.deleteFrom('vaults').where('account_id', '=', accountId).where('id', '=', id).execute()
}
