import { PostgresAdapter, type Selectable, type Updateable } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import { precompiled, precompiledList } from '../../store/precompiled.js'
import type { DocumentsTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'

export type DocumentRow = Selectable<DocumentsTable>
export type DocumentPatch = Updateable<DocumentsTable>

export async function insert(db: Executor, row: DocumentRow): Promise<void> {
  await db.insertInto('documents').values(row).execute()
}

const findByIdQuery = precompiled((db: Executor, accountId: string, vaultId: string, id: string) =>
  db
    .selectFrom('documents')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id),
)

export async function findById(db: Executor, accountId: string, vaultId: string, id: string) {
  const [row] = await findByIdQuery(db, accountId, vaultId, id)
  return row
}

/**
 * The row, locked until the caller's transaction ends (PostgreSQL; SQLite runs one transaction
 * at a time anyway).
 */
export function lockById(db: Executor, accountId: string, vaultId: string, id: string) {
  const query = db
    .selectFrom('documents')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
  return (
    db.getExecutor().adapter instanceof PostgresAdapter ? query.forUpdate() : query
  ).executeTakeFirst()
}

/** The most ids one read names (documents.service.ts MAX_IDS_PER_READ; not imported: a cycle). */
const MAX_IDS = 100

const findByIdsQuery = precompiledList(
  MAX_IDS,
  (db: Executor, [accountId, vaultId]: [string, string], ids: string[]) =>
    db
      .selectFrom('documents')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('vault_id', '=', vaultId)
      .where('id', 'in', ids),
)

export function findByIds(
  db: Executor,
  accountId: string,
  vaultId: string,
  ids: readonly string[],
): Promise<DocumentRow[]> {
  if (ids.length === 0) return Promise.resolve([])
  return findByIdsQuery(db, [accountId, vaultId], ids)
}

export interface ListFilter {
  accountId: string
  vaultId: string
  scopes: readonly ItemScope[]
  schemaId?: string
}

function filtered(db: Executor, f: ListFilter) {
  let q = db
    .selectFrom('documents')
    .where('account_id', '=', f.accountId)
    .where('vault_id', '=', f.vaultId)
    .where((eb) => scopePredicate(eb, f.scopes, 'id', 'owner_id'))
  if (f.schemaId !== undefined) q = q.where('schema_id', '=', f.schemaId)
  return q
}

/** A page of the documents the scopes admit, in id (creation) order. */
export function list(db: Executor, f: ListFilter, limit: number, offset: number) {
  return filtered(db, f).selectAll().orderBy('id').limit(limit).offset(offset).execute()
}

export async function count(db: Executor, f: ListFilter): Promise<number> {
  const row = await filtered(db, f)
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

export async function update(
  db: Executor,
  accountId: string,
  vaultId: string,
  id: string,
  patch: DocumentPatch,
) {
  await db
    .updateTable('documents')
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
): Promise<number> {
  const result = await db
    .deleteFrom('documents')
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

/** Documents tied to a schema, by id after `after`, for re-indexing in pages. */
export function pageBySchema(
  db: Executor,
  accountId: string,
  vaultId: string,
  schemaId: string,
  after: string,
  limit: number,
  /** PostgreSQL: lock the rows until the caller's transaction ends (a re-index batch). */
  lock = false,
) {
  const query = db
    .selectFrom('documents')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('schema_id', '=', schemaId)
    .where('id', '>', after)
    .orderBy('id')
    .limit(limit)
  return (
    lock && db.getExecutor().adapter instanceof PostgresAdapter ? query.forUpdate() : query
  ).execute()
}

export async function countBySchema(
  db: Executor,
  accountId: string,
  vaultId: string,
  schemaId: string,
): Promise<number> {
  const row = await db
    .selectFrom('documents')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('schema_id', '=', schemaId)
    .executeTakeFirst()
  return Number(row?.n ?? 0)
}

/** Re-encryption: the account's documents by id after `after` whose content is not under `keyId`. */
export function listNotUnderKey(
  db: Executor,
  accountId: string,
  keyId: string,
  after: string | undefined,
  limit: number,
) {
  let query = db
    .selectFrom('documents')
    .select(['vault_id', 'id', 'content'])
    .where('account_id', '=', accountId)
    .where('content', 'not like', `c1.${keyId}.%`)
  if (after !== undefined) query = query.where('id', '>', after)
  return query.orderBy('id').limit(limit).execute()
}

/** Swaps a document's ciphertext, only if nobody changed it meanwhile (updated_at kept). */
export async function replaceContent(
  db: Executor,
  accountId: string,
  vaultId: string,
  id: string,
  before: string,
  after: string,
): Promise<boolean> {
  const result = await db
    .updateTable('documents')
    .set({ content: after })
    .where('account_id', '=', accountId)
    .where('vault_id', '=', vaultId)
    .where('id', '=', id)
    .where('content', '=', before)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}
