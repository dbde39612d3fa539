import { randomSecret } from '../../crypto/secrets.js'
import type { Clock } from '../../lib/clock.js'
import { newId } from '../../lib/ids.js'
import type { PolicyStatement } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import type { GroupsService } from '../groups/groups.service.js'
import type { UserSchemaService } from '../schemas/user-schema.service.js'
import type { UsersService } from '../users/users.service.js'

/** Every resource row of the spec's access grid, with every activity. */
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

export class AccountsService {
  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly users: UsersService,
    private readonly groups: GroupsService,
    private readonly userSchemas: UserSchemaService,
  ) {}

  async hasAny(): Promise<boolean> {
    return (
      (await this.db.selectFrom('accounts').select('id').limit(1).executeTakeFirst()) !== undefined
    )
  }

  /** A new account with an admin user in a full-access group. The password is random. */
  async createWithAdmin(username = 'admin'): Promise<AccountCredentials> {
    const accountId = newId()
    await this.db
      .insertInto('accounts')
      .values({ id: accountId, created_at: this.clock.now().toISOString() })
      .execute()
    // A new account's user schema indexes the system fields only (spec, Search).
    await this.userSchemas.createInitial(this.db, accountId)
    const group = await this.groups.create(accountId, {
      name: 'FULL_ADMIN',
      policy: FULL_ACCESS_POLICY,
      userIds: [],
    })
    const password = randomSecret(18)
    const created = await this.users.create(accountId, {
      username,
      password,
      groupIds: [group.id],
      credentials: {},
    })
    if (!created.apiKey) throw new Error('the admin user was created without an API key')
    return { account_id: accountId, username, password, api_key: created.apiKey }
  }
}
