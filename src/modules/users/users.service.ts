import type { RequestedExpiry, UserCredentials } from '../../access/credentials.js'
import type { Actor } from '../../access/principal.js'
import { newTouchedId } from '../../audit/context.js'
import type { Keyring } from '../../crypto/keyring.js'
import type { PasswordHasher } from '../../crypto/passwords.js'
import type { SealedColumn } from '../../crypto/sealed-column.js'
import { digestSecret, randomSecret } from '../../crypto/secrets.js'
import type { SchemaField } from '../../indexing/index-values.js'
import type { Indexer } from '../../indexing/indexer.js'
import type { Clock } from '../../lib/clock.js'
import { AppError, ErrorType, errors } from '../../lib/errors.js'
import { inScopes, resource } from '../../policy/index.js'
import { isForeignKeyViolation, isUniqueViolation } from '../../store/db-errors.js'
import type { Executor } from '../../store/executor.js'
import type { GroupsService } from '../groups/groups.service.js'
import type { UserSchema } from '../schemas/user-schema.service.js'
import type { SettingsService } from '../settings/settings.service.js'
import type { UserRow } from './users.repo.js'
import * as repo from './users.repo.js'

/** A stored user as the service reads it (other modules name it through here, never the repo). */
export type { UserRow }

export const USER_STATUSES = ['ACTIVATED', 'PENDING', 'LOCKED', 'DEACTIVATED'] as const
export type UserStatus = (typeof USER_STATUSES)[number]

const CREATE_STATUSES: readonly string[] = ['ACTIVATED', 'PENDING', 'LOCKED']
const LIVE_STATUSES: readonly string[] = ['ACTIVATED', 'PENDING', 'LOCKED']
const MAX_USERNAME = 255
const MIN_PASSWORD = 8
const MAX_PASSWORD = 1024

/** A user as the policy simulator names it. */
export interface UserSummary {
  id: string
  username: string
  status: string
}

export interface NewUser {
  username: unknown
  password?: string | undefined
  attributes?: unknown
  groupIds: string[]
  status?: string | undefined
  /**
   * Vend the new user's API key and access token (with this expiry, normalized ISO text) in the
   * answer; absent for a registration through a SAT, which never holds a user's credentials.
   */
  credentials?: { tokenExpiresAt?: RequestedExpiry | undefined } | undefined
}

export interface UserChanges {
  username?: unknown
  password?: string
  attributes?: unknown
  status?: string
  /** Vend a new access token with this expiry (undefined: default lifetime). */
  newAccessToken?: { expiresAt?: RequestedExpiry | undefined }
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

/**
 * ASVS 5.0 6.2.1/6.2.9: at least 8 characters, long passphrases accepted, verified as typed.
 * The spec sets no minimum, so the message names ours. Both bounds count characters (code
 * points), as the messages say: an emoji is one character, not two UTF-16 units.
 */
export function validatePassword(value: unknown): string {
  if (typeof value !== 'string') throw errors.invalidField('password', 'must be a string')
  // A character is at most two UTF-16 units: a longer text is refused before it is counted.
  const length = value.length > 2 * MAX_PASSWORD ? value.length : [...value].length
  if (length < MIN_PASSWORD)
    throw errors.invalidField('password', `must be at least ${MIN_PASSWORD} characters`)
  if (length > MAX_PASSWORD)
    throw errors.invalidField('password', `must be at most ${MAX_PASSWORD} characters`)
  return value
}

const userResource = (id: string) => resource('User', id)

/** A new user validated, hashed and sealed, ready to insert (UsersService.prepare). */
export interface PreparedUser {
  row: UserRow
  attributes: unknown
  groupIds: string[]
  credentials: NewUser['credentials']
}

/** Another feature's cleanup when a user is deactivated, run in the deactivating transaction. */
export type DeactivationHook = (db: Executor, accountId: string, userId: string) => Promise<void>

/** Users of an account: lifecycle (spec, User status), credentials vending, attributes. */
export class UsersService {
  readonly #onDeactivate: DeactivationHook[] = []

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly hasher: PasswordHasher,
    private readonly credentials: UserCredentials,
    private readonly groups: GroupsService,
    private readonly keyring: Keyring,
    private readonly indexer: Indexer,
    /** The account's user schema (from the schemas module; read within the caller's transaction). */
    private readonly userSchema: (
      db: Executor,
      accountId: string,
    ) => Promise<UserSchema | undefined>,
    /** The account's password rules and session revocation (account settings). */
    private readonly settings: SettingsService,
  ) {}

  /**
   * A new password's rules, wherever one is set (create, update, set, reset): the server's bounds
   * (`validatePassword`), then the account's minimum length and the common-password list.
   * Existing passwords are never checked again: only new ones. 400 naming `password`.
   */
  async checkNewPassword(accountId: string, value: unknown): Promise<string> {
    const password = validatePassword(value)
    await this.settings.checkNewPassword(accountId, password)
    return password
  }

  /** Index rows of the user under the account's user schema, in the caller's transaction. */
  async #index(db: Executor, row: UserRow, attributes: unknown): Promise<void> {
    await this.indexer.indexUser(db, row, await this.userSchema(db, row.account_id), attributes)
  }

  async #attributes(row: UserRow): Promise<unknown> {
    return JSON.parse(await this.attributesJson(row))
  }

  /** Keys needed to re-index inside a transaction, loaded before it starts. */
  prepareReindex(accountId: string): Promise<void> {
    return this.keyring.preload(accountId)
  }

  /** Re-indexes every user of the account under new user-schema fields (caller's transaction). */
  async reindexAll(
    db: Executor,
    accountId: string,
    schema: { id: string; fields: SchemaField[] },
  ): Promise<void> {
    await this.indexer.removeSchema(db, accountId, schema.id)
    let after = ''
    for (;;) {
      const rows = await repo.pageAll(db, accountId, after, 500)
      for (const row of rows) {
        await this.indexer.indexUser(db, row, schema, await this.#attributes(row), 'truncate')
      }
      if (rows.length < 500) return
      after = (rows[rows.length - 1] as UserRow).id
    }
  }

  /** Attributes are encrypted at rest, bound to the user's id. */
  #seal(accountId: string, userId: string, attributes: unknown): Promise<string> {
    return this.keyring.encrypt(accountId, JSON.stringify(attributes), `user-attributes\n${userId}`)
  }

  /** The user's attributes as JSON text (decrypted; fails closed on tampering). */
  attributesJson(row: { account_id: string; id: string; attributes: string }): Promise<string> {
    return this.keyring.decryptText(row.account_id, row.attributes, `user-attributes\n${row.id}`)
  }

  /** The attributes column, for `coffer keys reencrypt` (crypto/sealed-column.ts). */
  sealedColumn(): SealedColumn {
    return {
      name: 'user_attributes',
      listNotUnder: async (accountId, keyId, after, limit) =>
        (await repo.listAttributesNotUnderKey(this.db, accountId, keyId, after, limit)).map(
          (row) => ({
            id: row.id,
            scope: '',
            ciphertext: row.attributes,
            context: `user-attributes\n${row.id}`,
          }),
        ),
      replace: (accountId, record, sealed) =>
        repo.replaceSealedAttributes(this.db, accountId, record.id, record.ciphertext, sealed),
    }
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
    const prepared = await this.prepare(accountId, input)
    return this.#uniqueUsername(() =>
      this.db.transaction().execute((trx) => this.#insertPrepared(trx, prepared)),
    )
  }

  /**
   * The work of `create` that must happen outside a transaction (on SQLite a transaction holds
   * the only connection): validation, hashing the password, sealing the attributes.
   */
  async prepare(accountId: string, input: NewUser): Promise<PreparedUser> {
    const username = validateUsername(input.username)
    const status = input.status || 'ACTIVATED'
    if (!CREATE_STATUSES.includes(status))
      throw errors.invalidField('status', 'must be ACTIVATED, PENDING or LOCKED')
    const passwordHash = input.password
      ? await this.hasher.hash(await this.checkNewPassword(accountId, input.password))
      : null
    const now = this.clock.now().toISOString()
    const id = newTouchedId('user')
    const attributes = input.attributes === undefined ? {} : input.attributes
    const row: UserRow = {
      account_id: accountId,
      id,
      username,
      status,
      password_hash: passwordHash,
      attributes: await this.#seal(accountId, id, attributes),
      mfa_enrolled: 0,
      access_key_digest: null,
      secret_key_digest: null,
      created_at: now,
      updated_at: now,
    }
    return { row, attributes, groupIds: input.groupIds, credentials: input.credentials }
  }

  /** Inserts a prepared user inside the caller's transaction (a new account's admin). */
  createIn(trx: Executor, prepared: PreparedUser) {
    return this.#uniqueUsername(() => this.#insertPrepared(trx, prepared))
  }

  async #insertPrepared(trx: Executor, prepared: PreparedUser) {
    const { row, groupIds } = prepared
    const accountId = row.account_id
    await this.groups.assertGroupsExist(trx, accountId, groupIds)
    await repo.insert(trx, row)
    await this.#index(trx, row, prepared.attributes)
    await this.groups.addUserToGroups(trx, accountId, row.id, groupIds)
    const vend = prepared.credentials
    const apiKey = vend ? await this.credentials.replaceApiKey(trx, accountId, row.id) : undefined
    const accessToken = vend
      ? await this.credentials.issueAccessToken(trx, accountId, row.id, vend.tokenExpiresAt)
      : undefined
    return { row, groupIds: [...groupIds].sort(), apiKey, accessToken }
  }

  hasUsers(accountId: string): Promise<boolean> {
    return repo.anyUser(this.db, accountId)
  }

  /** True when the id names a user of the account (any status): owners of documents and BLOBs. */
  async exists(accountId: string, id: string): Promise<boolean> {
    return (await repo.findById(this.db, accountId, id)) !== undefined
  }

  /** id, username and status of one user, if it is one of the account's. */
  async summary(accountId: string, id: string): Promise<UserSummary | undefined> {
    const row = await repo.findById(this.db, accountId, id)
    return row && { id: row.id, username: row.username, status: row.status }
  }

  /** id, username and status of every user of the account, by id. */
  summaries(accountId: string): Promise<UserSummary[]> {
    return repo.summaries(this.db, accountId)
  }

  countOfAccount(accountId: string): Promise<number> {
    return repo.countOfAccount(this.db, accountId)
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
    // Checked before hashing (a quick 400), and again below against the row being written.
    const before = await this.get(accountId, id)
    this.#checkUpdate(actor, before, changes)
    // What the index needs, decrypted before any transaction opens.
    const attributes =
      changes.attributes !== undefined ? changes.attributes : await this.#attributes(before)
    const patch: repo.UserPatch = { updated_at: this.clock.now().toISOString() }
    if (changes.username !== undefined) patch.username = validateUsername(changes.username)
    if (changes.password !== undefined)
      patch.password_hash = await this.hasher.hash(
        await this.checkNewPassword(accountId, changes.password),
      )
    if (changes.attributes !== undefined)
      patch.attributes = await this.#seal(accountId, id, changes.attributes)
    if (changes.status !== undefined) patch.status = changes.status
    for (let attempt = 0; attempt < 3; attempt++) {
      const done = await this.#uniqueUsername(() =>
        this.db.transaction().execute(async (trx) => {
          // A DELETE may have run since the first read (e.g. while hashing): re-check the row
          // and write only if its status is still the one checked, so a status change read
          // before a deactivation can never bring the user back (spec: DEACTIVATED is final).
          const current = await this.#find(trx, accountId, id)
          this.#checkUpdate(actor, current, changes)
          if (!(await repo.update(trx, accountId, id, patch, [current.status]))) return undefined
          if (changes.status === 'DEACTIVATED' && current.status !== 'DEACTIVATED') {
            await this.#detach(trx, accountId, id)
          }
          if (patch.password_hash !== undefined) await this.#endSessions(trx, actor, id)
          await this.#index(trx, await this.#find(trx, accountId, id), attributes)
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
      if (done) return done
    }
    throw new AppError(
      409,
      ErrorType.invalidRequest,
      'CONFLICT',
      'The user changed meanwhile; retry',
    )
  }

  async setPassword(actor: Actor, id: string, password: unknown): Promise<UserRow> {
    const accountId = actor.principal.accountId
    const hash = await this.hasher.hash(await this.checkNewPassword(accountId, password))
    await this.get(accountId, id)
    await this.db.transaction().execute(async (trx) => {
      await repo.update(trx, accountId, id, {
        password_hash: hash,
        updated_at: this.clock.now().toISOString(),
      })
      await this.#endSessions(trx, actor, id)
    })
    return this.get(accountId, id)
  }

  /**
   * A new password ends the user's other sessions (someone who knew the old one may hold a
   * token): every access token of the user goes, except the very one this request came with
   * (when that is the user's own access token). API keys are not sessions and stay. The
   * account's `session_revocation_on_password_change` (default on) can turn this off.
   */
  async #endSessions(db: Executor, actor: Actor, userId: string): Promise<void> {
    const p = actor.principal
    const { session_revocation_on_password_change: revoke } = await this.settings.get(
      p.accountId,
      db,
    )
    if (!revoke) return
    const keep = p.kind === 'user' && p.via === 'access_token' && p.userId === userId
    await this.credentials.revokeAccessTokens(
      db,
      p.accountId,
      userId,
      keep ? p.credentialDigest : undefined,
    )
  }

  /**
   * An access token's requested expiry (absent or empty: the default life), checked against the
   * server-wide maximum life; 400 naming `field` beyond it.
   */
  accessTokenExpiry(value: unknown, field: string): RequestedExpiry | undefined {
    return this.credentials.accessTokenExpiry(value, field)
  }

  /** Own attributes (PUT /v1/auth/me). */
  async setAttributes(accountId: string, id: string, attributes: unknown): Promise<UserRow> {
    const sealed = await this.#seal(accountId, id, attributes)
    return this.db.transaction().execute(async (trx) => {
      await repo.update(trx, accountId, id, {
        attributes: sealed,
        updated_at: this.clock.now().toISOString(),
      })
      const row = await this.#find(trx, accountId, id)
      await this.#index(trx, row, attributes)
      return row
    })
  }

  /**
   * DELETE: the user becomes DEACTIVATED, which frees the username, kills every credential and
   * leaves every group. No data is purged: the user stays readable with its status, but
   * deleting it again is a 404.
   */
  async deactivate(accountId: string, id: string): Promise<UserRow> {
    const attributes = await this.#attributes(await this.get(accountId, id))
    return this.db.transaction().execute(async (trx) => {
      const row = await this.#find(trx, accountId, id)
      if (row.status === 'DEACTIVATED') throw errors.notFound('User')
      const changed = await repo.update(
        trx,
        accountId,
        id,
        { status: 'DEACTIVATED', updated_at: this.clock.now().toISOString() },
        LIVE_STATUSES,
      )
      // Deactivated by a concurrent request since the read (PostgreSQL READ COMMITTED).
      if (!changed) throw errors.notFound('User')
      await this.#detach(trx, accountId, id)
      const updated = await this.#find(trx, accountId, id)
      // Still searchable, now with status DEACTIVATED.
      await this.#index(trx, updated, attributes)
      return updated
    })
  }

  async vendAccessToken(accountId: string, id: string, expiresAt?: RequestedExpiry) {
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

  /**
   * Registers cleanup for deactivation (MFA secrets). Hooks run inside the transaction, so they
   * must only run SQL (no keyring, no network).
   */
  onDeactivate(hook: DeactivationHook): void {
    this.#onDeactivate.push(hook)
  }

  /** The `mfa_enrolled` flag every user view shows; modules/mfa keeps it in step with its rows. */
  async setMfaEnrolled(db: Executor, accountId: string, id: string, enrolled: boolean) {
    await repo.update(db, accountId, id, {
      mfa_enrolled: enrolled ? 1 : 0,
      updated_at: this.clock.now().toISOString(),
    })
  }

  findForLogin(accountId: string, username: string) {
    return repo.findActivatedByUsername(this.db, accountId, username)
  }

  #checkUpdate(actor: Actor, current: UserRow, changes: UserChanges): void {
    if (changes.status !== undefined) this.#checkStatusChange(actor, current, changes.status)
    if (
      changes.newAccessToken &&
      (current.status === 'DEACTIVATED' || changes.status === 'DEACTIVATED')
    ) {
      throw errors.invalidField('access_token', 'cannot be vended for a DEACTIVATED user')
    }
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
    for (const hook of this.#onDeactivate) await hook(db, accountId, id)
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
      // The only key these writes can break: a group of `group_ids` deleted by a concurrent
      // request after it was checked (PostgreSQL; users themselves are never deleted).
      if (isForeignKeyViolation(e))
        throw errors.invalidField('group_ids', 'contains an unknown group')
      throw e
    }
  }
}
