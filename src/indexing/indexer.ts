import { errors } from '../lib/errors.js'
import type { Executor } from '../store/executor.js'
import {
  boundedIndexValues,
  type IndexValue,
  indexValues,
  type SchemaField,
  USER_SYSTEM_FIELDS,
} from './index-values.js'
import * as repo from './search-index.repo.js'

/**
 * What to do with content beyond the index limits (index-values.ts): a write is refused (400
 * naming the field); a re-index of content stored earlier (a schema change, POST …/reindex)
 * indexes what fits, so that old data can never block a schema change.
 */
export type OnOverflow = 'reject' | 'truncate'

/** The rows within the limits, or the 400 naming `<source>.<field>` under 'reject'. */
function withinLimits(
  source: 'document' | 'attributes',
  fields: readonly SchemaField[],
  content: unknown,
  onOverflow: OnOverflow,
  alreadyUsed = 0,
): IndexValue[] {
  const { rows, overflow } = boundedIndexValues(fields, content, alreadyUsed)
  if (overflow && onOverflow === 'reject')
    throw errors.invalidField(`${source}.${overflow.field}`, overflow.problem)
  return rows
}

/**
 * Keeps the search index in step with writes. Callers pass their transaction, so a document or
 * user and its index rows commit (or fail) together.
 */
export class Indexer {
  /** Indexes `content` under the schema (replacing earlier rows), or unindexes when no schema. */
  async index(
    db: Executor,
    accountId: string,
    docId: string,
    schema: { id: string; fields: readonly SchemaField[] } | null,
    content: unknown,
    onOverflow: OnOverflow = 'reject',
  ): Promise<void> {
    if (!schema) {
      await repo.removeRows(db, accountId, docId)
      return
    }
    const rows = withinLimits('document', schema.fields, content, onOverflow)
    await repo.replaceRows(db, accountId, schema.id, docId, rows)
  }

  /**
   * Indexes a user under the account's user schema: the schema's fields over the attributes,
   * plus the system fields. A user whose attributes are JSON null is not searchable.
   */
  async indexUser(
    db: Executor,
    user: { account_id: string; id: string; username: string; status: string; created_at: string },
    schema: { id: string; fields: readonly SchemaField[] } | undefined,
    attributes: unknown,
    onOverflow: OnOverflow = 'reject',
  ): Promise<void> {
    if (!schema || attributes === null) {
      await repo.removeRows(db, user.account_id, user.id)
      return
    }
    const system = {
      $sys: {
        id: user.id,
        username: user.username,
        status: user.status,
        created_at: user.created_at,
      },
    }
    // The system fields always fit: the attributes get what they leave of the per-user total.
    const systemRows = indexValues(USER_SYSTEM_FIELDS, system)
    const rows = [
      ...withinLimits('attributes', schema.fields, attributes, onOverflow, systemRows.length),
      ...systemRows,
    ]
    await repo.replaceRows(db, user.account_id, schema.id, user.id, rows)
  }

  remove(db: Executor, accountId: string, docId: string): Promise<void> {
    return repo.removeRows(db, accountId, docId)
  }

  removeSchema(db: Executor, accountId: string, schemaId: string): Promise<void> {
    return repo.removeSchemaRows(db, accountId, schemaId)
  }
}
