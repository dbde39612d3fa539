import { PostgresAdapter, type Selectable } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import type { SchemaReindexTable, SchemasTable, UserSchemasTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'

export type SchemaRow = Selectable<SchemasTable>
export type UserSchemaRow = Selectable<UserSchemasTable>

export async function insert(db: Executor, row: SchemaRow): Promise<void> {
  await db.insertInto('schemas').values(row).execute()
}

/**
 * `lock`: hold a share lock on the row until the caller's transaction ends, so an index write
 * under the schema's fields and an update of those fields (which re-indexes) cannot interleave
 * (PostgreSQL; SQLite runs one transaction at a time anyway).
 */
const shareLock = (db: Executor, lock: boolean) =>
  lock && db.getExecutor().adapter instanceof PostgresAdapter

export function findById(
  db: Executor,
  accountId: string,
  vaultId: string,
  id: string,
  lock = false,
) {
  const query = db
    .selectFrom('schemas')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
  return (shareLock(db, lock) ? query.forShare() : query).executeTakeFirst()
}

export function list(
  db: Executor,
  accountId: string,
  vaultId: string,
  scopes: readonly ItemScope[],
) {
  return db
    .selectFrom('schemas')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where((eb) => scopePredicate(eb, scopes, 'id'))
    .orderBy('id')
    .execute()
}

export async function update(
  db: Executor,
  accountId: string,
  vaultId: string,
  id: string,
  patch: Pick<SchemaRow, 'name' | 'fields' | 'updated_at'>,
): Promise<void> {
  await db
    .updateTable('schemas')
    .set(patch)
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
    .execute()
}

export async function remove(
  db: Executor,
  accountId: string,
  vaultId: string,
  id: string,
): Promise<void> {
  await db
    .deleteFrom('schemas')
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
    .execute()
}

export function findUserSchema(db: Executor, accountId: string, lock = false) {
  const query = db.selectFrom('user_schemas').selectAll().where('account_id', '=', accountId)
  return (shareLock(db, lock) ? query.forShare() : query).executeTakeFirst()
}

export async function insertUserSchema(db: Executor, row: UserSchemaRow): Promise<void> {
  await db.insertInto('user_schemas').values(row).execute()
}

export async function updateUserSchema(
  db: Executor,
  accountId: string,
  patch: Pick<UserSchemaRow, 'name' | 'fields' | 'updated_at'>,
): Promise<void> {
  await db.updateTable('user_schemas').set(patch).where('account_id', '=', accountId).execute()
}

export async function removeUserSchema(db: Executor, accountId: string): Promise<void> {
  await db.deleteFrom('user_schemas').where('account_id', '=', accountId).execute()
}

export type ReindexRow = Selectable<SchemaReindexTable>

/** Starts (or restarts from the first document) the batched re-index of a schema. */
export async function startReindex(
  db: Executor,
  accountId: string,
  row: Omit<ReindexRow, 'account_id' | 'after' | 'done' | 'finished_at'>,
): Promise<void> {
  const values = { ...row, account_id: accountId, after: '', done: 0, finished_at: null }
  await db
    .insertInto('schema_reindex')
    .values(values)
    .onConflict((oc) =>
      oc.columns(['account_id', 'schema_id']).doUpdateSet({
        after: '',
        done: 0,
        total: row.total,
        started_at: row.started_at,
        finished_at: null,
      }),
    )
    .execute()
}

export function findReindex(db: Executor, accountId: string, schemaId: string) {
  return db
    .selectFrom('schema_reindex')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('schema_id', '=', schemaId)
    .executeTakeFirst()
}

export async function advanceReindex(
  db: Executor,
  accountId: string,
  schemaId: string,
  step: { after: string; done: number; finished_at: string | null },
): Promise<void> {
  await db
    .updateTable('schema_reindex')
    .set(step)
    .where('account_id', '=', accountId)
    .where('schema_id', '=', schemaId)
    .execute()
}

export async function removeReindex(
  db: Executor,
  accountId: string,
  schemaId: string,
): Promise<void> {
  await db
    .deleteFrom('schema_reindex')
    .where('account_id', '=', accountId)
    .where('schema_id', '=', schemaId)
    .execute()
}

/**
 * Re-indexes left unfinished by a server that stopped, every account's (read once at start:
 * the one query here not scoped to an account, as it serves no request).
 */
export function unfinishedReindexes(db: Executor) {
  return db
    .selectFrom('schema_reindex')
    .select(['account_id', 'vault_id', 'schema_id'])
    .where('finished_at', 'is', null)
    .execute()
}
