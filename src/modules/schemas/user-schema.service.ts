import { createHash } from 'node:crypto'
import { newTouchedId } from '../../audit/context.js'
import type { SchemaField } from '../../indexing/index-values.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { newId } from '../../lib/ids.js'
import type { Executor } from '../../store/executor.js'
import type { SchemaDefinition } from './schema-definition.js'
import * as repo from './schemas.repo.js'

export interface UserSchema {
  id: string
  name: string
  fields: SchemaField[]
  /** TrueVault kept user attributes in an internal vault; clients read its id (a stable UUID). */
  vault_id: string
}

/** Re-indexes every user under new fields (users module): `prepare` before the transaction, `run` in it. */
export interface ReindexUsers {
  prepare(accountId: string): Promise<void>
  run(db: Executor, accountId: string, schema: { id: string; fields: SchemaField[] }): Promise<void>
}

/** A stable UUID (version 8, RFC 9562) derived from the account id: the user schema's "vault". */
export function userSchemaVaultId(accountId: string): string {
  const h = createHash('sha256').update(`coffer user schema vault\n${accountId}`).digest()
  h[6] = 0x80 | ((h[6] as number) & 0x0f)
  h[8] = 0x80 | ((h[8] as number) & 0x3f)
  const x = h.subarray(0, 16).toString('hex')
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`
}

const view = (row: repo.UserSchemaRow): UserSchema => ({
  id: row.id,
  name: row.name,
  fields: JSON.parse(row.fields) as SchemaField[],
  vault_id: userSchemaVaultId(row.account_id),
})

/**
 * The account's one user schema: which attributes make users searchable. A new account starts
 * with one that has no fields (only the system fields `$sys.*` are searchable).
 */
export class UserSchemaService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly reindex: ReindexUsers,
    private readonly hasUsers: (accountId: string) => Promise<boolean>,
  ) {}

  /** The initial schema of a new account (called while the account is created). */
  async createInitial(db: Executor, accountId: string): Promise<void> {
    const now = this.clock.now().toISOString()
    await repo.insertUserSchema(db, {
      account_id: accountId,
      id: newId(),
      name: 'user_schema',
      fields: '[]',
      created_at: now,
      updated_at: now,
    })
  }

  /** `lock`: as `SchemasService.find` (users index under it inside their write transaction). */
  async current(db: Executor, accountId: string, lock = false): Promise<UserSchema | undefined> {
    const row = await repo.findUserSchema(db, accountId, lock)
    return row ? view(row) : undefined
  }

  async get(accountId: string): Promise<UserSchema> {
    const schema = await this.current(this.db, accountId)
    if (!schema) throw errors.notFound('User schema')
    return schema
  }

  /** Only when the account has none (every account starts with one: update it instead). */
  async create(accountId: string, def: SchemaDefinition): Promise<UserSchema> {
    await this.reindex.prepare(accountId)
    return this.db.transaction().execute(async (trx) => {
      if (await repo.findUserSchema(trx, accountId)) {
        throw errors.badRequest(
          'USER_SCHEMA_EXISTS',
          'The account already has a user schema; update it instead',
        )
      }
      const now = this.clock.now().toISOString()
      const row = {
        account_id: accountId,
        id: newTouchedId('user_schema'),
        name: def.name,
        fields: JSON.stringify(def.fields),
        created_at: now,
        updated_at: now,
      }
      await repo.insertUserSchema(trx, row)
      await this.reindex.run(trx, accountId, { id: row.id, fields: def.fields })
      return view(row)
    })
  }

  /** New name and fields; every user is re-indexed in the same transaction. */
  async update(accountId: string, def: SchemaDefinition): Promise<UserSchema> {
    await this.reindex.prepare(accountId)
    return this.db.transaction().execute(async (trx) => {
      const row = await repo.findUserSchema(trx, accountId)
      if (!row) throw errors.notFound('User schema')
      const patch = {
        name: def.name,
        fields: JSON.stringify(def.fields),
        updated_at: this.clock.now().toISOString(),
      }
      await repo.updateUserSchema(trx, accountId, patch)
      await this.reindex.run(trx, accountId, { id: row.id, fields: def.fields })
      return view({ ...row, ...patch })
    })
  }

  /** Refused while the account has users (it always has its admin), as TrueVault did. */
  async delete(accountId: string): Promise<UserSchema> {
    const schema = await this.get(accountId)
    if (await this.hasUsers(accountId)) {
      throw errors.badRequest(
        'USER_SCHEMA_IN_USE',
        'The user schema cannot be deleted while the account has users',
      )
    }
    await repo.removeUserSchema(this.db, accountId)
    return schema
  }
}
