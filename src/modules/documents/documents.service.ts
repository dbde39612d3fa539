import { assertItemAllows } from '../../access/item-access.js'
import type { Actor } from '../../access/principal.js'
import { newTouchedId } from '../../audit/context.js'
import type { Keyring } from '../../crypto/keyring.js'
import type { SealedColumn } from '../../crypto/sealed-column.js'
import type { Indexer } from '../../indexing/indexer.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { changeOwner, ownedItem, type Requirement } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import type { Schema, SchemasService } from '../schemas/schemas.service.js'
import type { UsersService } from '../users/users.service.js'
import type { VaultsService } from '../vaults/vaults.service.js'
import type { DocumentRow } from './documents.repo.js'
import * as repo from './documents.repo.js'

/** A stored document as the service reads it (other modules name it through here, never the repo). */
export type { DocumentRow }

export const MAX_IDS_PER_READ = 100

/**
 * A document with its content decrypted: the UTF-8 JSON text as stored (what JSON.stringify made
 * of it), which answers use as it is (parsed and stringified again it would be the same text).
 */
export interface OpenDocument {
  row: DocumentRow
  json: Buffer
}

export interface NewDocument {
  content: unknown
  schemaId: string | undefined
  ownerId: string | null
}

/** `undefined` keeps the current value; `null` clears it (owner) or detaches (schema). */
export interface DocumentChanges {
  content?: unknown
  schemaId?: string | null
  ownerId?: string | null
}

const collection = (vaultId: string) => ['Vault', vaultId, 'Document']
export const documentResource = (row: Pick<DocumentRow, 'vault_id' | 'id' | 'owner_id'>) =>
  ownedItem([...collection(row.vault_id), row.id], row.owner_id)
const notFound = () => errors.notFound('Document')

function isJsonObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * JSON documents in vaults. Content is encrypted at rest under the account's data key, bound to
 * the vault and document ids. Permissions follow the spec's ownership table (policy/ownership).
 */
export class DocumentsService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly keyring: Keyring,
    private readonly vaults: VaultsService,
    private readonly users: UsersService,
    private readonly schemas: SchemasService,
    private readonly indexer: Indexer,
  ) {}

  async create(actor: Actor, vaultId: string, input: NewDocument): Promise<DocumentRow> {
    const accountId = actor.principal.accountId
    await this.vaults.require(this.db, accountId, vaultId)
    await this.#checkOwner(accountId, input.ownerId)
    const schema =
      input.schemaId === undefined ? null : await this.#schema(accountId, vaultId, input.schemaId)
    const bound = schema !== null
    this.#checkContent(input.content, bound)
    const now = this.clock.now().toISOString()
    const id = newTouchedId('document')
    const row: DocumentRow = {
      account_id: accountId,
      vault_id: vaultId,
      id,
      owner_id: input.ownerId,
      schema_id: input.schemaId ?? null,
      schema_bound: bound ? 1 : 0,
      content: await this.#seal(accountId, vaultId, id, input.content),
      created_at: now,
      updated_at: now,
    }
    // The document and its index rows commit together (the content was sealed before), under
    // the schema's fields as of the transaction (see #lockSchema).
    await this.db.transaction().execute(async (trx) => {
      await repo.insert(trx, row)
      if (!schema) return
      const current = await this.#lockSchema(trx, accountId, vaultId, schema.id)
      await this.indexer.index(trx, accountId, id, current, input.content)
    })
    return row
  }

  /** Reads several documents: every id must exist and be readable, or the read is a 404. */
  async getMany(actor: Actor, vaultId: string, ids: readonly string[]): Promise<OpenDocument[]> {
    const accountId = actor.principal.accountId
    await this.vaults.require(this.db, accountId, vaultId)
    const rows = new Map(
      (await repo.findByIds(this.db, accountId, vaultId, ids)).map((r) => [r.id, r]),
    )
    const found = ids.map((id) => {
      const row = rows.get(id)
      if (!row || !actor.grants.can('R', documentResource(row))) throw notFound()
      return row
    })
    return Promise.all(found.map(async (row) => ({ row, json: await this.#openJson(row) })))
  }

  /** A page of the documents the caller may read, with the total of those (never of others). */
  async list(
    actor: Actor,
    vaultId: string,
    page: { page: number; perPage: number; full: boolean; schemaId?: string },
  ) {
    const accountId = actor.principal.accountId
    await this.vaults.require(this.db, accountId, vaultId)
    const scopes = actor.grants.readScopes(collection(vaultId).concat(''))
    if (!scopes) throw errors.permissionDenied()
    if (
      page.schemaId !== undefined &&
      !(await this.schemas.find(this.db, accountId, vaultId, page.schemaId))
    ) {
      throw errors.notFound('Schema')
    }
    const filter = {
      accountId,
      vaultId,
      scopes,
      ...(page.schemaId !== undefined ? { schemaId: page.schemaId } : {}),
    }
    const [rows, total] = await Promise.all([
      repo.list(this.db, filter, page.perPage, (page.page - 1) * page.perPage),
      repo.count(this.db, filter),
    ])
    const items = await Promise.all(
      rows.map(async (row) => ({ row, json: page.full ? await this.#openJson(row) : undefined })),
    )
    return { items, total }
  }

  /**
   * Changes content (needs U on the document), schema and owner (the spec's ownership table;
   * Update plays no part there). Anything not given stays.
   */
  async update(
    actor: Actor,
    vaultId: string,
    id: string,
    changes: DocumentChanges,
  ): Promise<DocumentRow> {
    const accountId = actor.principal.accountId
    await this.vaults.require(this.db, accountId, vaultId)
    const row = await this.#find(accountId, vaultId, id)
    const item = documentResource(row)
    const needs: Requirement[] = []
    if (changes.content !== undefined) needs.push({ activity: 'U', resource: item })
    const ownerChange =
      changes.ownerId === undefined
        ? null
        : changeOwner(collection(vaultId), id, row.owner_id, changes.ownerId)
    if (ownerChange) needs.push(ownerChange)
    // A request that changes nothing still may not confirm that someone else's document exists.
    if (needs.length === 0) needs.push({ activity: 'R', resource: item })
    assertItemAllows(actor.grants, item, { allOf: needs }, notFound)

    if (changes.ownerId !== undefined) await this.#checkOwner(accountId, changes.ownerId)
    const schemaId = changes.schemaId === undefined ? row.schema_id : changes.schemaId
    const schema = schemaId === null ? null : await this.#schema(accountId, vaultId, schemaId)
    const bound = row.schema_bound === 1 || schema !== null
    const patch: repo.DocumentPatch = {
      updated_at: this.clock.now().toISOString(),
      schema_bound: bound ? 1 : 0,
    }
    // Content the index needs: the new one, or the stored one when only the schema changes.
    let content: unknown
    if (changes.content !== undefined) {
      this.#checkContent(changes.content, bound)
      content = changes.content
      patch.content = await this.#seal(accountId, vaultId, id, changes.content)
    } else if (schemaId !== row.schema_id) {
      content = await this.#open(row)
      // Tying existing content to a schema: it must already be an object.
      if (bound) this.#checkContent(content, true)
    }
    if (changes.schemaId !== undefined) patch.schema_id = changes.schemaId
    if (changes.ownerId !== undefined) patch.owner_id = changes.ownerId
    await this.db.transaction().execute(async (trx) => {
      await repo.update(trx, accountId, vaultId, id, patch)
      if (content === undefined) return
      const current = schema ? await this.#lockSchema(trx, accountId, vaultId, schema.id) : null
      await this.indexer.index(trx, accountId, id, current, content)
    })
    return this.#find(accountId, vaultId, id)
  }

  async delete(actor: Actor, vaultId: string, id: string): Promise<DocumentRow> {
    const accountId = actor.principal.accountId
    await this.vaults.require(this.db, accountId, vaultId)
    const row = await this.#find(accountId, vaultId, id)
    const item = documentResource(row)
    assertItemAllows(actor.grants, item, { activity: 'D', resource: item }, notFound)
    await this.db.transaction().execute(async (trx) => {
      if ((await repo.remove(trx, accountId, vaultId, id)) === 0) throw notFound()
      await this.indexer.remove(trx, accountId, id)
    })
    return row
  }

  /** Keys needed to re-index inside a transaction, loaded before it starts. */
  prepareReindex(accountId: string): Promise<void> {
    return this.keyring.preload(accountId)
  }

  /** Documents tied to the schema now (a re-index's total). */
  countForSchema(db: Executor, accountId: string, vaultId: string, schemaId: string) {
    return repo.countBySchema(db, accountId, vaultId, schemaId)
  }

  /**
   * Re-indexes the next `limit` documents tied to the schema after id `after`, in the caller's
   * transaction (one batch of a schema's re-index). `lock` (PostgreSQL): the rows are locked, so
   * a concurrent update of one commits first and is re-read; a deleted one is simply not found.
   */
  async reindexBatch(
    db: Executor,
    accountId: string,
    vaultId: string,
    schema: Schema,
    after: string,
    limit: number,
    lock: boolean,
  ): Promise<{ last: string | undefined; count: number }> {
    const rows = await repo.pageBySchema(db, accountId, vaultId, schema.id, after, limit, lock)
    for (const row of rows)
      await this.indexer.index(db, accountId, row.id, schema, await this.#open(row), 'truncate')
    return { last: rows[rows.length - 1]?.id, count: rows.length }
  }

  /** Re-indexes one document (POST …/reindex). */
  async reindex(actor: Actor, vaultId: string, id: string): Promise<DocumentRow> {
    const accountId = actor.principal.accountId
    await this.vaults.require(this.db, accountId, vaultId)
    const row = await this.#find(accountId, vaultId, id)
    const item = documentResource(row)
    assertItemAllows(actor.grants, item, { activity: 'U', resource: item }, notFound)
    await this.prepareReindex(accountId)
    await this.db.transaction().execute(async (trx) => {
      // The row as stored now, locked: a concurrent update (or reindex) of the document waits,
      // so the index ends up matching the content (they used to race: stale rows, or a 500 on
      // a duplicate index row).
      const current = await repo.lockById(trx, accountId, vaultId, id)
      if (!current) throw notFound()
      const schema =
        current.schema_id === null
          ? null
          : await this.#lockSchema(trx, accountId, vaultId, current.schema_id)
      await this.indexer.index(trx, accountId, id, schema, await this.#open(current), 'truncate')
    })
    return row
  }

  /**
   * The owner of a document (null: unowned), or undefined when the account has no such document:
   * what `$[Owner=…]` matchers are decided on (the policy simulator).
   */
  async ownerOf(accountId: string, vaultId: string, id: string) {
    return (await repo.findById(this.db, accountId, vaultId, id))?.owner_id
  }

  /** Decrypted content of a row the caller was allowed to see (search results). */
  openContent(row: DocumentRow): Promise<unknown> {
    return this.#open(row)
  }

  async #find(accountId: string, vaultId: string, id: string): Promise<DocumentRow> {
    const row = await repo.findById(this.db, accountId, vaultId, id)
    if (!row) throw notFound()
    return row
  }

  /** The content column, for `coffer keys reencrypt` (crypto/sealed-column.ts). */
  sealedColumn(): SealedColumn {
    return {
      name: 'documents',
      listNotUnder: async (accountId, keyId, after, limit) =>
        (await repo.listNotUnderKey(this.db, accountId, keyId, after, limit)).map((row) => ({
          id: row.id,
          scope: row.vault_id,
          ciphertext: row.content,
          context: `document\n${row.vault_id}\n${row.id}`,
        })),
      replace: (accountId, record, sealed) =>
        repo.replaceContent(this.db, accountId, record.scope, record.id, record.ciphertext, sealed),
    }
  }

  #seal(accountId: string, vaultId: string, id: string, content: unknown): Promise<string> {
    return this.keyring.encrypt(accountId, JSON.stringify(content), `document\n${vaultId}\n${id}`)
  }

  async #open(row: DocumentRow): Promise<unknown> {
    return JSON.parse((await this.#openJson(row)).toString('utf8'))
  }

  #openJson(row: DocumentRow): Promise<Buffer> {
    return this.keyring.decrypt(row.account_id, row.content, `document\n${row.vault_id}\n${row.id}`)
  }

  #checkContent(content: unknown, bound: boolean): void {
    if (content === undefined) throw errors.invalidField('document', 'is required')
    if (bound && !isJsonObject(content)) {
      throw errors.invalidField(
        'document',
        'must be a JSON object: the document is tied to a schema',
      )
    }
  }

  async #checkOwner(accountId: string, ownerId: string | null): Promise<void> {
    if (ownerId !== null && !(await this.users.exists(accountId, ownerId))) {
      throw errors.invalidField('owner_id', 'is not a user of this account')
    }
  }

  /**
   * The schema re-read inside the writing transaction (after the document row is written or
   * locked: always that order), share-locked: a concurrent schema update either waits for this
   * write (and its re-index then sees the document) or commits first (and this write indexes
   * under its new fields). Without it, a document written meanwhile stayed indexed under the
   * old fields.
   */
  async #lockSchema(
    trx: Executor,
    accountId: string,
    vaultId: string,
    schemaId: string,
  ): Promise<Schema> {
    const schema = await this.schemas.find(trx, accountId, vaultId, schemaId, true)
    if (!schema) throw errors.invalidField('schema_id', 'is not a schema of this vault')
    return schema
  }

  async #schema(accountId: string, vaultId: string, schemaId: string): Promise<Schema> {
    const schema = await this.schemas.find(this.db, accountId, vaultId, schemaId)
    if (!schema) throw errors.invalidField('schema_id', 'is not a schema of this vault')
    return schema
  }
}
