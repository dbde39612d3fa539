/**
 * Row types of every table. Portable column conventions (design.md, Storage): text UUID ids made
 * in the app, ISO-8601 UTC text timestamps, 0/1 integers for booleans, JSON as text.
 * Every tenant-owned table leads its keys with `account_id`.
 */
export interface AccountsTable {
  id: string
  created_at: string
}

export interface UsersTable {
  account_id: string
  id: string
  username: string
  status: string
  password_hash: string | null
  attributes: string
  mfa_enrolled: number
  access_key_digest: string | null
  secret_key_digest: string | null
  created_at: string
  updated_at: string
}

/** API keys and access tokens, stored only as digests and looked up by digest. */
export interface CredentialsTable {
  digest: string
  account_id: string
  user_id: string
  kind: string
  expires_at: string | null
  created_at: string
}

export interface GroupsTable {
  account_id: string
  id: string
  name: string
  policy: string
  created_at: string
  updated_at: string
}

export interface GroupMembersTable {
  account_id: string
  group_id: string
  user_id: string
}

/** Login failure counters; `key` is a digest of (scope, account, username[, client]). */
export interface LoginThrottleTable {
  key: string
  window_started_at: string
  failures: number
}

/** Clients (digest of IP) that logged in successfully; they are spared the per-user cap. */
export interface LoginKnownClientsTable {
  account_id: string
  user_id: string
  client_digest: string
  last_success_at: string
}

export interface Database {
  accounts: AccountsTable
  users: UsersTable
  credentials: CredentialsTable
  groups: GroupsTable
  group_members: GroupMembersTable
  login_throttle: LoginThrottleTable
  login_known_clients: LoginKnownClientsTable
}
