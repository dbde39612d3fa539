import type { Actor } from '../../access/principal.js'
import { newTouchedId, outsideAudit } from '../../audit/context.js'
import type { SchemaField } from '../../indexing/index-values.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { isForeignKeyViolation, isUniqueViolation } from '../../store/db-errors.js'
import type { Executor } from '../../store/executor.js'
import { outsideDeadline } from '../../store/request-deadline.js'
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
 * Re-indexes the documents of a schema whose fields changed, in batches (supplied by the
 * documents module): `prepare` loads keys before a batch's transaction, `count` and `batch` run
 * inside one.
 */
export interface ReindexDocuments {
  prepare(accountId: string): Promise<void>
  count(db: Executor, accountId: string, vaultId: string, schemaId: string): Promise<number>
  batch(
    db: Executor,
    accountId: string,
    vaultId: string,
    schema: Schema,
    after: string,
    limit: number,
    /** Lock the batch's documents (PostgreSQL), see #batch and update. */
    lockDocuments: boolean,
  ): Promise<{ last: string | undefined; count: number }>
}

/**
 * Documents per re-index batch: one short transaction each (on SQLite it holds the one writer
 * and the event loop while it runs), with the event loop yielded between batches.
 */
export const REINDEX_BATCH = 200

/** How far a schema's batched re-index is (GET of the schema). */
export interface ReindexProgress {
  /** `none`: never re-indexed; `running`: batches left; `done`: every document re-indexed. */
  state: 'none' | 'running' | 'done'
  documents_done: number
  documents_total: number
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
  /** Re-indexes this node is driving, by `account/schema`. */
  readonly #driving = new Map<string, Promise<void>>()
  /** Re-indexes restarted (the schema changed again) while their driver ran. */
  readonly #restarted = new Set<string>()
  #stopping = false

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly vaults: VaultsService,
    private readonly reindex: ReindexDocuments,
    /** Told when a batch fails: the re-index stays unfinished and resumes at the next start. */
    private readonly onReindexError: (error: unknown) => void = () => {},
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

  /** How far the re-index of the schema's documents is (GET …/schemas/{id}/reindex). */
  async reindexStatus(accountId: string, vaultId: string, id: string): Promise<ReindexProgress> {
    await this.vaults.require(this.db, accountId, vaultId)
    await this.#find(this.db, accountId, vaultId, id)
    return this.reindexProgress(accountId, id)
  }

  async reindexProgress(accountId: string, schemaId: string): Promise<ReindexProgress> {
    const row = await repo.findReindex(this.db, accountId, schemaId)
    if (!row) return { state: 'none', documents_done: 0, documents_total: 0 }
    return {
      state: row.finished_at === null ? 'running' : 'done',
      documents_done: Number(row.done),
      documents_total: Math.max(Number(row.total), Number(row.done)),
    }
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

  /**
   * New name and fields. When the fields changed, the schema's documents are re-indexed: in
   * this same transaction when they fit in one batch (REINDEX_BATCH), else in batches after it
   * commits (progress: GET …/schemas/{id}/reindex; documents written meanwhile are indexed
   * under the new fields by their own write).
   */
  async update(
    accountId: string,
    vaultId: string,
    id: string,
    def: SchemaDefinition,
  ): Promise<Schema> {
    await this.vaults.require(this.db, accountId, vaultId)
    await this.reindex.prepare(accountId)
    const fields = JSON.stringify(def.fields)
    const now = this.clock.now().toISOString()
    const schema = { id, vault_id: vaultId, name: def.name, fields: def.fields }
    const inBatches = await this.#uniqueName(() =>
      this.db.transaction().execute(async (trx) => {
        const before = await this.#find(trx, accountId, vaultId, id)
        await repo.update(trx, accountId, vaultId, id, { name: def.name, fields, updated_at: now })
        if (before.fields === fields) return false
        const total = await this.reindex.count(trx, accountId, vaultId, id)
        const start = { schema_id: id, vault_id: vaultId, total, started_at: now }
        await repo.startReindex(trx, accountId, start)
        if (total > REINDEX_BATCH) return true
        // No document locks here: this transaction holds the schema row exclusively, so every
        // write of one of its documents waits for it (its schema share lock) and then indexes
        // under the new fields; locking documents too could deadlock with such a write.
        const { last, count } = await this.reindex.batch(
          trx,
          accountId,
          vaultId,
          schema,
          '',
          REINDEX_BATCH,
          false,
        )
        await repo.advanceReindex(trx, accountId, id, {
          after: last ?? '',
          done: count,
          finished_at: now,
        })
        return false
      }),
    )
    if (inBatches) this.#drive(accountId, vaultId, id)
    return schema
  }

  /** Drives the re-indexes a stopped server left unfinished (`coffer serve` at start). */
  async resumeReindexes(): Promise<number> {
    this.#stopping = false
    const rows = await repo.unfinishedReindexes(this.db)
    for (const r of rows) this.#drive(r.account_id, r.vault_id, r.schema_id)
    return rows.length
  }

  /** Resolves once no re-index runs on this node (tests; shutdown after stopReindexes). */
  async reindexIdle(): Promise<void> {
    while (this.#driving.size > 0) await Promise.all(this.#driving.values())
  }

  /** Shutdown: the batch running finishes, no other starts (the rest resumes at next start). */
  async stopReindexes(): Promise<void> {
    this.#stopping = true
    await this.reindexIdle()
  }

  #drive(accountId: string, vaultId: string, schemaId: string): void {
    const key = `${accountId}/${schemaId}`
    if (this.#driving.has(key)) {
      // Its driver reads where to go on from the store at each batch; this makes sure it does
      // not stop on a "finished" it read just before the restart.
      this.#restarted.add(key)
      return
    }
    // Not part of the request that started it: no deadline, no audit event of its own (the
    // schema change that started it was audited).
    const driving = outsideAudit(() =>
      outsideDeadline(() => this.#batches(key, accountId, vaultId, schemaId)),
    )
    this.#driving.set(key, driving)
  }

  async #batches(key: string, accountId: string, vaultId: string, schemaId: string) {
    // #drive records this run only once it has its promise: nothing below may end it before.
    await Promise.resolve()
    try {
      for (;;) {
        if (this.#stopping) return
        await this.reindex.prepare(accountId)
        const finished = await this.#batch(accountId, vaultId, schemaId)
        if (finished) {
          if (!this.#restarted.delete(key)) return
        }
        // Yield: requests queued meanwhile run before the next batch takes the writer.
        await new Promise((resolve) => setImmediate(resolve))
      }
    } catch (error) {
      this.onReindexError(error)
    } finally {
      this.#driving.delete(key)
      this.#restarted.delete(key)
    }
  }

  /** One batch in its own transaction; true once nothing is left. */
  async #batch(accountId: string, vaultId: string, schemaId: string): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      // Shared-locked: the fields cannot change under the batch (a change waits, then restarts).
      const row = await repo.findById(trx, accountId, vaultId, schemaId, true)
      const state = await repo.findReindex(trx, accountId, schemaId)
      if (!row || !state || state.finished_at !== null) return true
      const schema = toSchema(row)
      const { last, count } = await this.reindex.batch(
        trx,
        accountId,
        vaultId,
        schema,
        state.after,
        REINDEX_BATCH,
        // Only share-locked schema here: document writes run beside the batch, so its documents
        // are locked for it (a write in progress on one commits first, then is re-read).
        true,
      )
      const finished = count < REINDEX_BATCH
      await repo.advanceReindex(trx, accountId, schemaId, {
        after: last ?? state.after,
        done: Number(state.done) + count,
        finished_at: finished ? this.clock.now().toISOString() : null,
      })
      return finished
    })
  }

  /** Refused while documents are tied to the schema (they reference it). */
  async delete(accountId: string, vaultId: string, id: string): Promise<Schema> {
    await this.vaults.require(this.db, accountId, vaultId)
    const row = await this.#find(this.db, accountId, vaultId, id)
    try {
      await this.db.transaction().execute(async (trx) => {
        await repo.remove(trx, accountId, vaultId, id)
        await repo.removeReindex(trx, accountId, id)
      })
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
