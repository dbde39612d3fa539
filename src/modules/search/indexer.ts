import type { Executor } from '../../store/executor.js'
import { indexValues, type SchemaField, USER_SYSTEM_FIELDS } from './index-values.js'
import * as repo from './search-index.repo.js'

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
  ): Promise<void> {
    if (!schema) {
      await repo.removeRows(db, accountId, docId)
      return
    }
    await repo.replaceRows(db, accountId, schema.id, docId, indexValues(schema.fields, content))
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
    const rows = [
      ...indexValues(schema.fields, attributes),
      ...indexValues(USER_SYSTEM_FIELDS, system),
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
