/**
 * Row types of every table. Portable column conventions (docs/architecture.md, Data): text UUID ids made
 * in the app, ISO-8601 UTC text timestamps, 0/1 integers for booleans, JSON as text.
 * Every tenant-owned table leads its keys with `account_id` (test/schema-shard-rule.test.ts
 * enforces it, and names the few tables that are distributed otherwise).
 */
import type { Generated } from 'kysely'
/** The singleton row of the first account (migration 0010): present once one exists. */
export interface BootstrapTable {
  id: string
  account_id: string
  created_at: string
}

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

/** API keys and access tokens, stored only as digests; key (account_id, digest) (0012). */
export interface CredentialsTable {
  account_id: string
  digest: string
  user_id: string
  kind: string
  expires_at: string | null
  created_at: string
}

/**
 * Which account a presented secret belongs to: digest of an API key, access token or SAT
 * password → account (0012). The one table distributed by digest rather than account: it is
 * read once per request, to route every other query of that request to the account's shard.
 */
export interface CredentialDirectoryTable {
  digest: string
  account_id: string
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

/**
 * Fixed-window counters (login failures, message and reset-email counts); `key` is a digest of
 * what is counted. `account_id` is the account counted in, or '' (SERVER_SCOPE) for server-wide
 * windows, which belong to no account (0012).
 */
export interface LoginThrottleTable {
  account_id: string
  key: string
  window_started_at: string
  failures: number
  /** Login attempts counted in `failures` whose password is still being checked (0011). */
  in_flight: Generated<number>
}

/** Clients (digest of IP) that logged in successfully; they are spared the per-user cap. */
export interface LoginKnownClientsTable {
  account_id: string
  user_id: string
  client_digest: string
  last_success_at: string
}

export interface DataKeysTable {
  account_id: string
  id: string
  wrapped_key: string
  master_key_id: string
  /** Migration 0019: HMAC fingerprint of the wrapping master key; NULL on older rows. */
  master_key_fingerprint: string | null
  created_at: string
}

export interface VaultsTable {
  account_id: string
  id: string
  name: string
  created_at: string
  updated_at: string
}

export interface SchemasTable {
  account_id: string
  vault_id: string
  id: string
  name: string
  /** JSON array of `{name, type, index}`. */
  fields: string
  created_at: string
  updated_at: string
}

/** Batched re-index of a vault schema's documents (migration 0018). */
export interface SchemaReindexTable {
  account_id: string
  schema_id: string
  vault_id: string
  /** The last document id re-indexed, in id order ('' before the first batch). */
  after: string
  done: number
  /** Documents tied to the schema when the re-index started. */
  total: number
  started_at: string
  finished_at: string | null
}

export interface DocumentsTable {
  account_id: string
  vault_id: string
  id: string
  owner_id: string | null
  schema_id: string | null
  /** 1 once ever tied to a schema: the content must then stay a JSON object. */
  schema_bound: number
  /** Keyring ciphertext of the JSON text. */
  content: string
  created_at: string
  updated_at: string
}

export interface BlobsTable {
  account_id: string
  vault_id: string
  id: string
  owner_id: string | null
  filename: string
  mime_type: string
  /** Plaintext size in bytes (int8 on PostgreSQL: read back through Number()). */
  size: number | string
  object_key: string
  /** Keyring ciphertext of this content version's stream key. */
  content_key: string
  metadata_document_id: string | null
  created_at: string
  updated_at: string
}

/** One indexed value of a document or user (docs/search.md). */
export interface SearchIndexTable {
  account_id: string
  schema_id: string
  /** Document id, or user id for the user schema. */
  doc_id: string
  field: string
  /** Position of the value among the field's values. */
  ord: number
  value_text: string | null
  value_lower: string | null
  value_num: number | null
  geo_lat: number | null
  geo_long: number | null
}

export interface UserSchemasTable {
  account_id: string
  id: string
  name: string
  fields: string
  created_at: string
  updated_at: string
}

/** Scoped access tokens; the secret is stored only as a digest. */
export interface ScopedAccessTokensTable {
  account_id: string
  id: string
  /** The user the token acts for (it never exceeds their current permissions). */
  creator_id: string
  /** The SAT that minted this one, or null when a user did. */
  parent_id: string | null
  name: string
  /** JSON array of policy statements. */
  policy: string
  /** Exactly as the caller sent it. */
  not_valid_after: string
  /** `not_valid_after` as a normalised ISO-8601 UTC text, for comparisons. */
  expires_at: string
  allowed_uses: number | null
  consumed_uses: number
  secret_digest: string
  created_at: string
  /**
   * Digest of the access token it was minted through (directly or by an ancestor SAT), null for
   * an API key's or the server's: such a SAT works only while that session does.
   */
  session_digest: string | null
}

/** Password reset flows; `sg_api_key` is keyring ciphertext. */
export interface PasswordResetFlowsTable {
  account_id: string
  id: string
  /** The user whose permissions bound the reset tokens (when no SAT is linked). */
  creator_id: string
  name: string
  sg_api_key: string
  sg_template_id: string
  /** JSON value specifiers and substitutions, as given. */
  user_email_value_spec: string
  from_email_value_spec: string
  substitutions: string
  /** The SAT that bounds the reset tokens instead, once linked. */
  linked_sat_id: string | null
  created_at: string
}

/**
 * TOTP enrollment of a user (modules/mfa): keyring ciphertexts of the pending and the active
 * secret, the last accepted time step, and the code-failure window.
 */
export interface UserMfaTable {
  account_id: string
  user_id: string
  pending_secret: string | null
  secret: string | null
  last_used_step: number
  failures: number
  failures_window_started_at: string | null
  created_at: string
  updated_at: string
}

/** A consumer's current consent in one shop (modules/consent); not tied to an account. */
export interface ConsentRecordsTable {
  /** The consumer partition: the shop domain or identifier. */
  shop: string
  /** Keyed digest of the consumer identifier (customer id or email): the lookup key. */
  consumer_digest: string
  /** The identifier, sealed (AES-256-GCM) for the export; never stored in plaintext. */
  consumer_sealed: string
  /** `customer_id` (storefront) or `email`. */
  consumer_kind: string
  consent_analytics: number | null
  consent_advertising: number | null
  consent_personalization: number | null
  consent_targeted_advertising: number | null
  opted_out: number | null
  /** Last explicit change (POST); null while no explicit choice is in force. */
  choice_at: string | null
  /** Tokens issued before this Unix second are refused (int8 on PostgreSQL: via Number()). */
  token_epoch: number | string
  last_provider: string
  last_privacy_center_id: string
  last_client_id: string | null
  created_at: string
  updated_at: string
}

/** Append-only history of consent changes (proof of consent). */
export interface ConsentEventsTable {
  /** The consumer partition: the shop domain or identifier. */
  shop: string
  id: string
  consumer_digest: string
  at: string
  /** `created`, `updated` or `lapsed`. */
  action: string
  provider: string | null
  privacy_center_id: string | null
  client_id: string | null
  /** JSON `{field: {from, to}}` of the fields the change carried. */
  changes: string
  /** JSON of every preference field after the change. */
  state: string
  gpc: number | null
  user_agent: string | null
}

/**
 * An account's security settings (migration 0013); no row: every default (modules/settings).
 * Booleans are 0/1; a null cap is no cap beyond the server's own limits.
 */
export interface AccountSettingsTable {
  account_id: string
  max_access_token_duration_seconds: number | null
  require_mfa: number
  password_min_length: number
  session_revocation_on_password_change: number
  /** Operations an account may consume per UTC day (migration 0015); null: no quota. */
  daily_operations_quota: number | string | null
  updated_at: string
}

/** Operations consumed per account, UTC day and billing category (migration 0015). */
export interface OperationCountsTable {
  account_id: string
  /** `YYYY-MM-DD`, UTC. */
  day: string
  category: string
  /** A bigint: PostgreSQL hands it back as text. */
  n: number | string
}

/** One audited request or CLI command, in its account's hash chain (migration 0014). */
export interface AuditEventsTable {
  account_id: string
  seq: number
  id: string
  at: string
  transaction_id: string
  actor_user_id: string | null
  credential_kind: string | null
  credential_ref: string | null
  sat_id: string | null
  sat_creator_id: string | null
  client_ip: string | null
  method: string
  route: string
  operation: string
  /** JSON `{kind: [ids…]}` or `{kind: {count}}` past the id bound (never values). */
  resources: string
  decision: string
  reason: string | null
  status: number
  operations_consumed: number
  operations_category: string | null
  prev_hash: string
  hash: string
}

/** The head of an account's audit chain, locked by each append (migration 0014). */
export interface AuditChainHeadsTable {
  account_id: string
  last_seq: number
  last_hash: string
  anchor_seq: number
  anchor_hash: string
}

/** Which node takes each slot of the backup schedule, and how the last run went (0022). */
export interface BackupScheduleTable {
  id: string
  /** The last slot a node claimed (ISO-8601; '' before the first). */
  slot: string
  /** The node working on it; null once done. */
  holder: string | null
  /** A holder past this time is presumed gone: another node may claim the next slot. */
  lease_until: string | null
  last_success_at: string | null
  /** Bytes of the last good backup (int8 on PostgreSQL: read through Number()). */
  last_size: number | string | null
  last_target: string | null
  last_failure_at: string | null
  last_error: string | null
  failures: Generated<number>
}

export interface Database {
  backup_schedule: BackupScheduleTable
  schema_reindex: SchemaReindexTable
  audit_events: AuditEventsTable
  audit_chain_heads: AuditChainHeadsTable
  accounts: AccountsTable
  account_settings: AccountSettingsTable
  operation_counts: OperationCountsTable
  bootstrap: BootstrapTable
  users: UsersTable
  credentials: CredentialsTable
  credential_directory: CredentialDirectoryTable
  groups: GroupsTable
  group_members: GroupMembersTable
  login_throttle: LoginThrottleTable
  login_known_clients: LoginKnownClientsTable
  data_keys: DataKeysTable
  vaults: VaultsTable
  schemas: SchemasTable
  documents: DocumentsTable
  blobs: BlobsTable
  search_index: SearchIndexTable
  user_schemas: UserSchemasTable
  scoped_access_tokens: ScopedAccessTokensTable
  password_reset_flows: PasswordResetFlowsTable
  user_mfa: UserMfaTable
  consent_records: ConsentRecordsTable
  consent_events: ConsentEventsTable
}
