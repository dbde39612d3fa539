import { PasswordHasher, type PasswordHasherOptions } from './crypto/passwords.js'
import { type Clock, systemClock } from './lib/clock.js'
import { AccountsService } from './modules/accounts/accounts.service.js'
import { AuthzService } from './modules/auth/authz.service.js'
import { CredentialsService } from './modules/auth/credentials.service.js'
import { LoginService } from './modules/auth/login.service.js'
import { LoginThrottle } from './modules/auth/login-throttle.js'
import { noScopedTokens, type ScopedTokenResolver } from './modules/auth/principal.js'
import { GroupsService } from './modules/groups/groups.service.js'
import { UsersService } from './modules/users/users.service.js'
import type { Store } from './store/db.js'

export interface Deps {
  store: Store
  clock: Clock
  hasher: PasswordHasher
  credentials: CredentialsService
  scopedTokens: ScopedTokenResolver
  authz: AuthzService
  groups: GroupsService
  users: UsersService
  login: LoginService
  accounts: AccountsService
}

export interface DepsOptions {
  clock?: Clock
  /** Tests use cheaper argon2 parameters; production keeps the OWASP ones. */
  argon2?: PasswordHasherOptions
}

/** The composition root: the one place that picks implementations and wires services. */
export function createDeps(store: Store, options: DepsOptions = {}): Deps {
  const db = store.db
  const clock = options.clock ?? systemClock
  const hasher = new PasswordHasher(options.argon2)
  const credentials = new CredentialsService(db, clock)
  const groups = new GroupsService(db, clock)
  const users = new UsersService(db, clock, hasher, credentials, groups)
  const throttle = new LoginThrottle(db, clock)
  return {
    store,
    clock,
    hasher,
    credentials,
    scopedTokens: noScopedTokens,
    authz: new AuthzService(groups),
    groups,
    users,
    login: new LoginService(db, clock, hasher, users, credentials, throttle),
    accounts: new AccountsService(db, clock, users, groups),
  }
}
