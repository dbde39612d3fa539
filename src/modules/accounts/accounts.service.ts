import { auditSubject } from '../../audit/context.js'
import type { Keyring } from '../../crypto/keyring.js'
import { randomSecret } from '../../crypto/secrets.js'
import type { Clock } from '../../lib/clock.js'
import { newId } from '../../lib/ids.js'
import type { PolicyStatement } from '../../policy/index.js'
import { dataKeyStore } from '../../store/data-keys.repo.js'
import type { Executor } from '../../store/executor.js'
import type { GroupsService } from '../groups/groups.service.js'
import type { UserSchemaService } from '../schemas/user-schema.service.js'
import type { UsersService } from '../users/users.service.js'
import * as repo from './accounts.repo.js'

/**
 * Every resource row of the spec's access grid, with every activity, and the account's security
 * settings (`Account::<id>::Settings`, R and U; issue 13), the account's audit trail (`Audit::`,
 * read through R), the policy simulator (`PolicySimulator::`, R; issue 15) and the deployment's
 * backup status (`Backups::`, R; issue 22). Migrations 0013, 0014, 0017 and 0023 give the same
 * to groups of earlier releases that still hold exactly the policy before each.
 */
export const FULL_ACCESS_POLICY: PolicyStatement[] = [
  {
    Resources: [
      'Vault::.*',
      'Vault::.*::Document::.*',
      'Vault::.*::Blob::.*',
      'Vault::.*::Schema::.*',
      'Vault::.*::Search::.*',
      'User::.*',
      'User::.*::Password',
      'User::.*::Message',
      'UserSchema::.*',
      'Group::.*',
      'Group::.*::GroupMembership::.*',
      'PasswordResetFlow::.*',
      'PasswordResetFlow::.*::Email::.*',
      'Account::.*::Settings',
      'Audit::',
      'PolicySimulator::',
      'Backups::',
    ],
    Activities: 'CRUD',
  },
]

/** What `coffer account create` prints and first start writes to bootstrap-credentials.json. */
export interface AccountCredentials {
  account_id: string
  username: string
  password: string
  api_key: string
}

/** Whether a creation may claim the first-account row, and what it does when it is taken. */
export interface CreateOptions {
  username?: string
  /**
   * First start: create the account only if no account was ever bootstrapped (the singleton
   * row); null when one was, also by another node a moment ago.
   */
  firstStart?: boolean
  /**
   * Runs inside the transaction, after every row is written and before the commit: first start
   * stages the credentials file here, so a crash after the commit still leaves them on disk.
   * Throwing rolls everything back.
   */
  beforeCommit?: (credentials: AccountCredentials) => void | Promise<void>
}

export class AccountsService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly keyring: Keyring,
    private readonly users: UsersService,
    private readonly groups: GroupsService,
    private readonly userSchemas: UserSchemaService,
  ) {}

  /** Whether this database ever got its first account (by first start or `account create`). */
  async isBootstrapped(): Promise<boolean> {
    return (await repo.firstAccount(this.db)) !== undefined
  }

  /**
   * A new account with an admin user in a full-access group, its user schema, data key and
   * credentials: all in one transaction, so a failure or crash anywhere leaves no row at all.
   * The password is random.
   */
  async createWithAdmin(
    options: CreateOptions & { firstStart: true },
  ): Promise<AccountCredentials | null>
  async createWithAdmin(options?: CreateOptions): Promise<AccountCredentials>
  async createWithAdmin(options: CreateOptions = {}): Promise<AccountCredentials | null> {
    const username = options.username ?? 'admin'
    const accountId = newId()
    // The command that creates it (`coffer account create`, first start) files its event there.
    auditSubject(accountId)
    const createdAt = this.clock.now().toISOString()
    const dataKey = this.keyring.newAccountKey(accountId)
    const password = randomSecret(18)
    // Hashing and sealing happen before the transaction (SQLite: it holds the only connection).
    const admin = await this.users.prepare(accountId, {
      username,
      password,
      groupIds: [],
      credentials: {},
    })
    return this.db.transaction().execute(async (trx) => {
      // First: on SQLite this write takes the write lock, on PostgreSQL the row's lock, so
      // racing first starts queue here and all but one find the row taken.
      const claimed = await repo.claimFirstAccount(trx, accountId, createdAt)
      if (!claimed && options.firstStart) return null
      await repo.insertAccount(trx, accountId, createdAt)
      await dataKeyStore(trx).insert(dataKey)
      // A new account's user schema indexes the system fields only (spec, Search).
      await this.userSchemas.createInitial(trx, accountId)
      const group = await this.groups.createIn(trx, accountId, {
        name: 'FULL_ADMIN',
        policy: FULL_ACCESS_POLICY,
        userIds: [],
      })
      const created = await this.users.createIn(trx, { ...admin, groupIds: [group.id] })
      if (!created.apiKey) throw new Error('the admin user was created without an API key')
      const credentials = { account_id: accountId, username, password, api_key: created.apiKey }
      await options.beforeCommit?.(credentials)
      return credentials
    })
  }
}
