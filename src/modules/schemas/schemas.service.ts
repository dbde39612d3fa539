import type { Actor } from '../../access/principal.js'
import { newTouchedId } from '../../audit/context.js'
import type { SchemaField } from '../../indexing/index-values.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { isForeignKeyViolation, isUniqueViolation } from '../../store/db-errors.js'
import type { Executor } from '../../store/executor.js'
import type { VaultsService } from '../vaults/vaults.service.js'
import type { SchemaDefinition } from './schema-definition.js'
import * as repo from './schemas.repo.js'

export interface Schema {
  id: string
  vault_id: string
  name: string
  fields: SchemaField[]
}

/**
 * Re-indexes every document of a schema whose fields changed (supplied by the documents module):
 * `prepare` runs before the transaction (it loads keys), `run` inside it.
 */
export interface ReindexDocuments {
  prepare(accountId: string): Promise<void>
  run(db: Executor, accountId: string, vaultId: string, schema: Schema): Promise<void>
}

export const toSchema = (row: repo.SchemaRow): Schema => ({
  id: row.id,
  vault_id: row.vault_id,
  name: row.name,
  fields: JSON.parse(row.fields) as SchemaField[],
})

const notFound = () => errors.notFound('Schema')

/** Vault schemas: the indexed fields of the documents tied to them. */
export class SchemasService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly vaults: VaultsService,
    private readonly reindex: ReindexDocuments,
  ) {}

  async create(accountId: string, vaultId: string, def: SchemaDefinition): Promise<Schema> {
    await this.vaults.require(this.db, accountId, vaultId)
    const now = this.clock.now().toISOString()
    const row: repo.SchemaRow = {
      account_id: accountId,
      vault_id: vaultId,
      id: newTouchedId('schema'),
      name: def.name,
      fields: JSON.stringify(def.fields),
      created_at: now,
      updated_at: now,
    }
    await this.#uniqueName(() => repo.insert(this.db, row))
    return toSchema(row)
  }

  async get(accountId: string, vaultId: string, id: string): Promise<Schema> {
    return toSchema(await this.#find(this.db, accountId, vaultId, id))
  }

  /**
   * The schema in the vault, or undefined (documents check links with it). `lock` (inside a
   * transaction that indexes under it) keeps its fields from changing until that commits.
   */
  async find(
    db: Executor,
    accountId: string,
    vaultId: string,
    id: string,
    lock = false,
  ): Promise<Schema | undefined> {
    const row = await repo.findById(db, accountId, vaultId, id, lock)
    return row ? toSchema(row) : undefined
  }

  async list(actor: Actor, vaultId: string): Promise<Schema[]> {
    await this.vaults.require(this.db, actor.principal.accountId, vaultId)
    const scopes = actor.grants.readScopes(['Vault', vaultId, 'Schema', ''])
    if (!scopes) throw errors.permissionDenied()
    return (await repo.list(this.db, actor.principal.accountId, vaultId, scopes)).map(toSchema)
  }

  /** New name and fields; the schema's documents are re-indexed in the same transaction. */
  async update(
    accountId: string,
    vaultId: string,
    id: string,
    def: SchemaDefinition,
  ): Promise<Schema> {
    await this.vaults.require(this.db, accountId, vaultId)
    await this.reindex.prepare(accountId)
    return this.#uniqueName(() =>
      this.db.transaction().execute(async (trx) => {
        await this.#find(trx, accountId, vaultId, id)
        const patch = {
          name: def.name,
          fields: JSON.stringify(def.fields),
          updated_at: this.clock.now().toISOString(),
        }
        await repo.update(trx, accountId, vaultId, id, patch)
        const schema = { id, vault_id: vaultId, name: def.name, fields: def.fields }
        await this.reindex.run(trx, accountId, vaultId, schema)
        return schema
      }),
    )
  }

  /** Refused while documents are tied to the schema (they reference it). */
  async delete(accountId: string, vaultId: string, id: string): Promise<Schema> {
    await this.vaults.require(this.db, accountId, vaultId)
    const row = await this.#find(this.db, accountId, vaultId, id)
    try {
      await repo.remove(this.db, accountId, vaultId, id)
    } catch (e) {
      if (isForeignKeyViolation(e)) {
        throw errors.badRequest(
          'SCHEMA_IN_USE',
          'Documents are tied to this schema; delete or detach them first',
        )
      }
      throw e
    }
    return toSchema(row)
  }

  async #find(
    db: Executor,
    accountId: string,
    vaultId: string,
    id: string,
  ): Promise<repo.SchemaRow> {
    const row = await repo.findById(db, accountId, vaultId, id)
    if (!row) throw notFound()
    return row
  }

  async #uniqueName<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run()
    } catch (e) {
      if (isUniqueViolation(e))
        throw errors.invalidField('schema', 'name is already used by another schema of this vault')
      throw e
    }
  }
}
