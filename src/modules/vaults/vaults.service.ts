import { ExactCache } from '../../access/exact-cache.js'
import type { Actor } from '../../access/principal.js'
import { newTouchedId } from '../../audit/context.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { isForeignKeyViolation, isUniqueViolation } from '../../store/db-errors.js'
import type { Executor } from '../../store/executor.js'
import type { RightsFeed } from '../../store/rights-feed.js'
import * as repo from './vaults.repo.js'

export interface Vault {
  id: string
  name: string
  account_id: string
}

const MAX_NAME = 255

function validateName(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw errors.invalidField('name', 'is required')
  if (value.length > MAX_NAME)
    throw errors.invalidField('name', `must be at most ${MAX_NAME} characters`)
  if (/\p{Cc}/u.test(value))
    throw errors.invalidField('name', 'must not contain control characters')
  return value
}

const view = (row: repo.VaultRow): Vault => ({
  id: row.id,
  name: row.name,
  account_id: row.account_id,
})

/** Named containers of documents, BLOBs and schemas; names are unique per account. */
export class VaultsService {
  /** Vault rows by account and id (issue 21): emptied by every committed write to `vaults`. */
  readonly #rows: ExactCache<repo.VaultRow>

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    rights: RightsFeed,
  ) {
    this.#rows = new ExactCache(rights)
  }

  async create(accountId: string, name: unknown): Promise<Vault> {
    const now = this.clock.now().toISOString()
    const row: repo.VaultRow = {
      account_id: accountId,
      id: newTouchedId('vault'),
      name: validateName(name),
      created_at: now,
      updated_at: now,
    }
    await this.#unique(() => repo.insert(this.db, row))
    return view(row)
  }

  async get(accountId: string, id: string): Promise<Vault> {
    return view(await this.require(this.db, accountId, id))
  }

  /**
   * The vault row or 404: every document, BLOB and schema request starts here. Outside a
   * transaction from the cache when it holds it; inside one always from the database, as the
   * transaction's own check.
   */
  async require(db: Executor, accountId: string, id: string): Promise<repo.VaultRow> {
    if (db.isTransaction) return this.#read(db, accountId, id)
    const key = `${accountId}/${id}`
    const now = this.clock.now().getTime()
    const cached = this.#rows.get(key, now)
    if (cached) return cached
    const ticket = this.#rows.ticket()
    const row = Object.freeze(await this.#read(db, accountId, id))
    this.#rows.set(key, row, now, Number.POSITIVE_INFINITY, ticket)
    return row
  }

  async #read(db: Executor, accountId: string, id: string): Promise<repo.VaultRow> {
    const row = await repo.findById(db, accountId, id)
    if (!row) throw errors.notFound('Vault')
    return row
  }

  /** Only the vaults the caller may read (R on `Vault::<id>`), by page. */
  async list(actor: Actor, page: number, perPage: number): Promise<Vault[]> {
    const scopes = actor.grants.readScopes(['Vault', ''])
    if (!scopes) throw errors.permissionDenied()
    const rows = await repo.list(
      this.db,
      actor.principal.accountId,
      scopes,
      perPage,
      (page - 1) * perPage,
    )
    return rows.map(view)
  }

  async rename(accountId: string, id: string, name: unknown): Promise<Vault> {
    const valid = validateName(name)
    await this.require(this.db, accountId, id)
    await this.#unique(() =>
      repo.rename(this.db, accountId, id, valid, this.clock.now().toISOString()),
    )
    return this.get(accountId, id)
  }

  /** Deletes an empty vault; one that still holds documents, BLOBs or schemas is refused. */
  async delete(accountId: string, id: string): Promise<Vault> {
    const notEmpty = () =>
      errors.badRequest(
        'VAULT_NOT_EMPTY',
        'The vault still holds documents, BLOBs or schemas; delete them first',
      )
    try {
      return await this.#deleteEmpty(accountId, id, notEmpty)
    } catch (e) {
      // Something was added between the check and the delete (PostgreSQL, READ COMMITTED).
      if (isForeignKeyViolation(e)) throw notEmpty()
      throw e
    }
  }

  #deleteEmpty(accountId: string, id: string, notEmpty: () => Error): Promise<Vault> {
    return this.db.transaction().execute(async (trx) => {
      const row = await this.require(trx, accountId, id)
      if (!(await repo.isEmpty(trx, accountId, id))) throw notEmpty()
      await repo.remove(trx, accountId, id)
      return view(row)
    })
  }

  async #unique(run: () => Promise<void>): Promise<void> {
    try {
      await run()
    } catch (e) {
      if (isUniqueViolation(e)) throw errors.conflict('name', 'is already used by another vault')
      throw e
    }
  }
}
