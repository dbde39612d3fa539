import type { Executor } from '../store/executor.js'
import type { IndexValue } from './index-values.js'

/** Replaces every index row of one document (or user) under a schema. */
export async function replaceRows(
  db: Executor,
  accountId: string,
  schemaId: string,
  docId: string,
  rows: readonly IndexValue[],
): Promise<void> {
  await removeRows(db, accountId, docId)
  // Batches keep each statement under the engines' parameter limits.
  for (let i = 0; i < rows.length; i += 100) {
    await db
      .insertInto('search_index')
      .values(
        rows
          .slice(i, i + 100)
          .map((r) => ({ account_id: accountId, schema_id: schemaId, doc_id: docId, ...r })),
      )
      .execute()
  }
}

/** Removes every index row of a document (or user), under any schema. */
export async function removeRows(db: Executor, accountId: string, docId: string): Promise<void> {
  await db
    .deleteFrom('search_index')
    .where('account_id', '=', accountId)
    .where('doc_id', '=', docId)
    .execute()
}

export async function removeSchemaRows(
  db: Executor,
  accountId: string,
  schemaId: string,
): Promise<void> {
  await db
    .deleteFrom('search_index')
    .where('account_id', '=', accountId)
    .where('schema_id', '=', schemaId)
    .execute()
}
