import type { Keyring } from '../../crypto/keyring.js'
import type { PasswordHasher } from '../../crypto/passwords.js'
import { digestSecret, randomSecret } from '../../crypto/secrets.js'
import type { Clock } from '../../lib/clock.js'
import { errors } from '../../lib/errors.js'
import { newId } from '../../lib/ids.js'
import { inScopes, resource } from '../../policy/index.js'
import { isUniqueViolation } from '../../store/db-errors.js'
import type { Executor } from '../../store/executor.js'
import type { CredentialsService } from '../auth/credentials.service.js'
import type { Actor } from '../auth/principal.js'
import type { GroupsService } from '../groups/groups.service.js'
import type { UserRow } from './users.repo.js'
import * as repo from './users.repo.js'

export const USER_STATUSES = ['ACTIVATED', 'PENDING', 'LOCKED', 'DEACTIVATED'] as const
export type UserStatus = (typeof USER_STATUSES)[number]

const CREATE_STATUSES: readonly string[] = ['ACTIVATED', 'PENDING', 'LOCKED']
const MAX_USERNAME = 255
const MIN_PASSWORD = 8
const MAX_PASSWORD = 1024

export interface NewUser {
  username: unknown
  password?: string | undefined
  attributes?: unknown
  groupIds: string[]
  status?: string | undefined
  /** Expiry of the access token vended with the user (normalized ISO text). */
  tokenExpiresAt?: string | undefined
}

export interface UserChanges {
  username?: unknown
  password?: string
  attributes?: unknown
  status?: string
  /** Vend a new access token with this expiry (undefined: default lifetime). */
  newAccessToken?: { expiresAt?: string | undefined }
}

export function validateUsername(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw errors.invalidField('username', 'is required')
  if (value.length > MAX_USERNAME)
    throw errors.invalidField('username', `must be at most ${MAX_USERNAME} characters`)
  if (/\p{Cc}/u.test(value))
    throw errors.invalidField('username', 'must not contain control characters')
  return value
}

/** ASVS 5.0 6.2.1/6.2.9: at least 8 characters, long passphrases accepted, verified as typed. */
export function validatePassword(value: unknown): string {
  if (typeof value !== 'string') throw errors.invalidField('password', 'must be a string')
  if ([...value].length < MIN_PASSWORD)
    throw errors.invalidField('password', `must be at least ${MIN_PASSWORD} characters`)
  if (value.length > MAX_PASSWORD)
    throw errors.invalidField('password', `must be at most ${MAX_PASSWORD} characters`)
  return value
}

const userResource = (id: string) => resource('User', id)

/** Users of an account: lifecycle (spec, User status), credentials vending, attributes. */
export class UsersService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly hasher: PasswordHasher,
    private readonly credentials: CredentialsService,
    private readonly groups: GroupsService,
    private readonly keyring: Keyring,
  ) {}

  /** Attributes are encrypted at rest, bound to the user's id. */
  #seal(accountId: string, userId: string, attributes: unknown): Promise<string> {
    return this.keyring.encrypt(accountId, JSON.stringify(attributes), `user-attributes\n${userId}`)
  }

  /** The user's attributes as JSON text (decrypted; fails closed on tampering). */
  attributesJson(row: { account_id: string; id: string; attributes: string }): Promise<string> {
    return this.keyring.decryptText(row.account_id, row.attributes, `user-attributes\n${row.id}`)
  }

  /**
   * Encrypts attributes stored in plaintext by a version before encryption at rest (run at start;
   * a plaintext value is never read as such). Returns how many rows it encrypted.
   */
  async encryptPlaintextAttributes(): Promise<number> {
    const rows = await repo.listPlaintextAttributes(this.db)
    for (const row of rows) {
      const sealed = await this.keyring.encrypt(
        row.account_id,
        row.attributes,
        `user-attributes\n${row.id}`,
      )
      await repo.replaceAttributes(this.db, row.account_id, row.id, row.attributes, sealed)
    }
    return rows.length
  }

  async create(accountId: string, input: NewUser) {
    const username = validateUsername(input.username)
    const status = input.status || 'ACTIVATED'
    if (!CREATE_STATUSES.includes(status))
      throw errors.invalidField('status', 'must be ACTIVATED, PENDING or LOCKED')
    // Hash before the transaction: on SQLite a transaction holds the only connection.
    const passwordHash = input.password
      ? await this.hasher.hash(validatePassword(input.password))
      : null
    const now = this.clock.now().toISOString()
    const id = newId()
    const row: UserRow = {
      account_id: accountId,
      id,
      username,
      status,
      password_hash: passwordHash,
      attributes: await this.#seal(accountId, id, input.attributes ?? {}),
      mfa_enrolled: 0,
      access_key_digest: null,
      secret_key_digest: null,
      created_at: now,
      updated_at: now,
    }
    return this.#uniqueUsername(() =>
      this.db.transaction().execute(async (trx) => {
        await this.groups.assertGroupsExist(trx, accountId, input.groupIds)
        await repo.insert(trx, row)
        await this.groups.addUserToGroups(trx, accountId, row.id, input.groupIds)
        const apiKey = await this.credentials.replaceApiKey(trx, accountId, row.id)
        const accessToken = await this.credentials.issueAccessToken(
          trx,
          accountId,
          row.id,
          input.tokenExpiresAt,
        )
        return { row, groupIds: [...input.groupIds].sort(), apiKey, accessToken }
      }),
    )
  }

  /** True when the id names a user of the account (any status): owners of documents and BLOBs. */
  async exists(accountId: string, id: string): Promise<boolean> {
    return (await repo.findById(this.db, accountId, id)) !== undefined
  }

  get(accountId: string, id: string): Promise<UserRow> {
    return this.#find(this.db, accountId, id)
  }

  /** v2 read: every id must exist and be readable, or the whole read is a 404. */
  async getMany(actor: Actor, ids: readonly string[]): Promise<UserRow[]> {
    const rows = await repo.findByIds(this.db, actor.principal.accountId, ids)
    const byId = new Map(rows.map((r) => [r.id, r]))
    return ids.map((id) => {
      const row = byId.get(id)
      if (!row || !actor.grants.can('R', userResource(id))) throw errors.notFound('User')
      return row
    })
  }

  async list(actor: Actor, statuses: readonly string[]): Promise<UserRow[]> {
    const scopes = actor.grants.readScopes(['User', ''])
    // Fail closed: without any readable scope the route's check should already have refused.
    if (!scopes) throw errors.permissionDenied()
    const rows = await repo.list(this.db, actor.principal.accountId, statuses, scopes)
    return rows.filter((r) => inScopes(scopes, { id: r.id }))
  }

  /** PUT /v1/users/{id}: overwrites the given fields only. */
  async update(actor: Actor, id: string, changes: UserChanges) {
    const accountId = actor.principal.accountId
    const current = await this.get(accountId, id)
    if (changes.status !== undefined) this.#checkStatusChange(actor, current, changes.status)
    if (
      changes.newAccessToken &&
      (current.status === 'DEACTIVATED' || changes.status === 'DEACTIVATED')
    ) {
      throw errors.invalidField('access_token', 'cannot be vended for a DEACTIVATED user')
    }
    const patch: repo.UserPatch = { updated_at: this.clock.now().toISOString() }
    if (changes.username !== undefined) patch.username = validateUsername(changes.username)
    if (changes.password !== undefined)
      patch.password_hash = await this.hasher.hash(validatePassword(changes.password))
    if (changes.attributes !== undefined)
      patch.attributes = await this.#seal(accountId, id, changes.attributes)
    if (changes.status !== undefined) patch.status = changes.status
    return this.#uniqueUsername(() =>
      this.db.transaction().execute(async (trx) => {
        await repo.update(trx, accountId, id, patch)
        if (changes.status === 'DEACTIVATED' && current.status !== 'DEACTIVATED') {
          await this.#detach(trx, accountId, id)
        }
        const accessToken = changes.newAccessToken
          ? await this.credentials.issueAccessToken(
              trx,
              accountId,
              id,
              changes.newAccessToken.expiresAt,
            )
          : undefined
        return { row: await this.#find(trx, accountId, id), accessToken }
      }),
    )
  }

  async setPassword(accountId: string, id: string, password: unknown): Promise<UserRow> {
    const hash = await this.hasher.hash(validatePassword(password))
    await this.get(accountId, id)
    await repo.update(this.db, accountId, id, {
      password_hash: hash,
      updated_at: this.clock.now().toISOString(),
    })
    return this.get(accountId, id)
  }

  /** Own attributes (PUT /v1/auth/me). */
  async setAttributes(accountId: string, id: string, attributes: unknown): Promise<UserRow> {
    await repo.update(this.db, accountId, id, {
      attributes: await this.#seal(accountId, id, attributes),
      updated_at: this.clock.now().toISOString(),
    })
    return this.get(accountId, id)
  }

  /**
   * DELETE: the user becomes DEACTIVATED, which frees the username, kills every credential and
   * leaves every group. No data is purged: the user stays readable with its status, but
   * deleting it again is a 404.
   */
  async deactivate(accountId: string, id: string): Promise<UserRow> {
    return this.db.transaction().execute(async (trx) => {
      const row = await this.#find(trx, accountId, id)
      if (row.status === 'DEACTIVATED') throw errors.notFound('User')
      await repo.update(trx, accountId, id, {
        status: 'DEACTIVATED',
        updated_at: this.clock.now().toISOString(),
      })
      await this.#detach(trx, accountId, id)
      return this.#find(trx, accountId, id)
    })
  }

  async vendAccessToken(accountId: string, id: string, expiresAt?: string) {
    const row = await this.#live(accountId, id)
    const accessToken = await this.credentials.issueAccessToken(this.db, accountId, id, expiresAt)
    return { row, accessToken }
  }

  async rotateApiKey(accountId: string, id: string): Promise<string> {
    await this.#live(accountId, id)
    return this.db
      .transaction()
      .execute((trx) => this.credentials.replaceApiKey(trx, accountId, id))
  }

  /** Deprecated access/secret key pair: replaced on each call, stored only as digests. */
  async replaceAccessKeyPair(accountId: string, id: string) {
    await this.#live(accountId, id)
    const accessKey = randomSecret(16)
    const secretKey = randomSecret(32)
    await repo.update(this.db, accountId, id, {
      access_key_digest: digestSecret(accessKey),
      secret_key_digest: digestSecret(secretKey),
      updated_at: this.clock.now().toISOString(),
    })
    return { accessKey, secretKey }
  }

  findForLogin(accountId: string, username: string) {
    return repo.findActivatedByUsername(this.db, accountId, username)
  }

  /**
   * The spec's status table: a DEACTIVATED user never returns. Changing your own status needs a
   * grant other than `User::$[id=self.id]`, so users cannot reactivate or unlock themselves.
   */
  #checkStatusChange(actor: Actor, current: UserRow, status: string): void {
    if (!(USER_STATUSES as readonly string[]).includes(status)) {
      throw errors.invalidField('status', 'must be ACTIVATED, PENDING, LOCKED or DEACTIVATED')
    }
    if (current.status === 'DEACTIVATED' && status !== 'DEACTIVATED') {
      throw errors.invalidField(
        'status',
        'cannot change: a DEACTIVATED user cannot return to another status',
      )
    }
    const self =
      actor.principal.kind === 'user' ? actor.principal.userId : actor.principal.creatorId
    if (
      self === current.id &&
      !actor.grants.can('U', userResource(current.id), { allowSelf: false })
    ) {
      throw errors.permissionDenied()
    }
  }

  async #detach(db: Executor, accountId: string, id: string): Promise<void> {
    await this.credentials.revokeAll(db, accountId, id)
    await this.groups.removeUserFromAll(db, accountId, id)
    await repo.update(db, accountId, id, { access_key_digest: null, secret_key_digest: null })
  }

  async #live(accountId: string, id: string): Promise<UserRow> {
    const row = await this.get(accountId, id)
    if (row.status === 'DEACTIVATED')
      throw errors.badRequest('USER_DEACTIVATED', 'The user is DEACTIVATED')
    return row
  }

  async #find(db: Executor, accountId: string, id: string): Promise<UserRow> {
    const row = await repo.findById(db, accountId, id)
    if (!row) throw errors.notFound('User')
    return row
  }

  async #uniqueUsername<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run()
    } catch (e) {
      if (isUniqueViolation(e))
        throw errors.conflict('username', 'is already taken by another user')
      throw e
    }
  }
}
