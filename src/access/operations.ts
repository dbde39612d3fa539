import type { Metering } from './metering.js'

/**
 * The operation catalog: one id per route (`<resource>.<action>`), declared here once. Each
 * route names its id in `config.operation`, beside its access rule (src/http/access.ts); a route
 * without one, or with one missing here, stops the server from starting. What every request is
 * counted, metered and audited under hangs on these ids, and the OpenAPI `operationId` of each
 * documented route is this table's `openapi` name (src/http/openapi/operation-ids.ts).
 */
interface OperationSpec {
  /** The operation's name in the OpenAPI document; none for the routes no document shows. */
  readonly openapi?: string
  /**
   * How the operation counts in billing operations (the spec's "Operations (billing units
   * consumed)" table); none: it counts 0. A metered route reports what it returned (see
   * access/metering.ts); the metering feature counts it, the audit event carries it.
   */
  readonly metering?: Metering
}

const USER_READ = { category: 'user_read', rule: 'per_item_if_full' } as const
const DOCUMENT_READ = { category: 'document_read', rule: 'per_item' } as const
const DOCUMENT_LIST = { category: 'document_list', rule: 'per_item_if_full' } as const
const DOCUMENT_SEARCH = { category: 'document_search', rule: 'one_plus_per_item_if_full' } as const
const USER_SEARCH = { category: 'user_search', rule: 'one_plus_per_item_if_full' } as const

const CATALOG = {
  // auth
  'auth.login': { openapi: 'login' },
  'auth.logout': { openapi: 'logout' },
  'auth.logout_all': { openapi: 'logoutAll' },
  'current_user.read': { openapi: 'readCurrentUser' },
  'current_user.update': { openapi: 'updateCurrentUser' },
  // users
  'user.create': { openapi: 'createUser' },
  'user.list': { openapi: 'listUsers', metering: USER_READ },
  'user.read_v2': { openapi: 'readUsersV2', metering: USER_READ },
  'user.read': { openapi: 'readUser' },
  'user.update': { openapi: 'updateUser' },
  'user.delete': { openapi: 'deleteUser' },
  'user.update_password': { openapi: 'updateUserPassword' },
  'user.create_access_token': { openapi: 'createUserAccessToken' },
  'user.create_api_key': { openapi: 'createUserApiKey' },
  'user.create_access_key': { openapi: 'createUserAccessKey' },
  // groups
  'group.create': { openapi: 'createGroup' },
  'group.list': { openapi: 'listGroups' },
  'group.read': { openapi: 'readGroup' },
  'group.update': { openapi: 'updateGroup' },
  'group.delete': { openapi: 'deleteGroup' },
  'group.add_members': { openapi: 'addGroupMembers' },
  'group.remove_members': { openapi: 'removeGroupMembers' },
  // vaults
  'vault.create': { openapi: 'createVault' },
  'vault.list': { openapi: 'listVaults' },
  'vault.read': { openapi: 'readVault' },
  'vault.update': { openapi: 'updateVault' },
  'vault.delete': { openapi: 'deleteVault' },
  'vault.list_by_account': { openapi: 'listAccountVaults' },
  // audit trail
  'audit_event.list': { openapi: 'listAuditEvents' },
  // policy simulator (issue 15)
  'policy.explain': { openapi: 'explainPolicy' },
  'policy.access': { openapi: 'listPolicyAccess' },
  // backups (issue 22)
  'backup_status.read': { openapi: 'readBackupStatus' },
  // account settings
  'account_settings.read': { openapi: 'readAccountSettings' },
  'account_settings.update': { openapi: 'updateAccountSettings' },
  'account_usage.read': { openapi: 'readAccountUsage' },
  // documents
  'document.create_v2': { openapi: 'createDocumentV2' },
  'document.create': { openapi: 'createDocument' },
  'document.list': { openapi: 'listDocuments', metering: DOCUMENT_LIST },
  'document.read_v2': { openapi: 'readDocumentsV2', metering: DOCUMENT_READ },
  'document.update_v2': { openapi: 'updateDocumentV2' },
  'document.read': { openapi: 'readDocuments', metering: DOCUMENT_READ },
  'document.update': { openapi: 'updateDocument' },
  'document.delete': { openapi: 'deleteDocument' },
  'document.list_by_schema': { openapi: 'listSchemaDocuments', metering: DOCUMENT_LIST },
  'document.update_owner': { openapi: 'updateDocumentOwner' },
  'document.reindex': { openapi: 'reindexDocument' },
  // BLOBs
  'blob.upload': { openapi: 'uploadBlob' },
  'blob.list': { openapi: 'listBlobs' },
  'blob.replace': { openapi: 'replaceBlob' },
  'blob.download': { openapi: 'downloadBlob' },
  'blob.delete': { openapi: 'deleteBlob' },
  'blob.update_owner': { openapi: 'updateBlobOwner' },
  // schemas
  'schema.create': { openapi: 'createSchema' },
  'schema.list': { openapi: 'listSchemas' },
  'schema.read': { openapi: 'readSchema' },
  'schema.reindex_status': { openapi: 'readSchemaReindex' },
  'schema.update': { openapi: 'updateSchema' },
  'schema.delete': { openapi: 'deleteSchema' },
  'user_schema.create': { openapi: 'createAccountUserSchema' },
  'user_schema.read': { openapi: 'readAccountUserSchema' },
  'user_schema.update': { openapi: 'updateAccountUserSchema' },
  'user_schema.delete': { openapi: 'deleteAccountUserSchema' },
  // search (the legacy query alias also answers, undocumented, on the vault's path without slash)
  'document.search': { openapi: 'searchDocuments', metering: DOCUMENT_SEARCH },
  'document.search_legacy': { openapi: 'searchDocumentsLegacy', metering: DOCUMENT_SEARCH },
  'document.search_legacy_query': {
    openapi: 'searchDocumentsLegacyQuery',
    metering: DOCUMENT_SEARCH,
  },
  'user.search': { openapi: 'searchUsers', metering: USER_SEARCH },
  // scoped access tokens
  'scoped_access_token.create': { openapi: 'createScopedAccessToken' },
  'scoped_access_token.list': { openapi: 'listScopedAccessTokens' },
  'scoped_access_token.read': { openapi: 'readScopedAccessToken' },
  'scoped_access_token.delete': { openapi: 'deleteScopedAccessToken' },
  // messaging
  'user.send_email': { openapi: 'sendUserEmail' },
  'user.send_sms': { openapi: 'sendUserSms' },
  // password reset flows
  'password_reset_flow.create': { openapi: 'createPasswordResetFlow' },
  'password_reset_flow.list': { openapi: 'listPasswordResetFlows' },
  'password_reset_flow.read': { openapi: 'readPasswordResetFlow' },
  'password_reset_flow.delete': { openapi: 'deletePasswordResetFlow' },
  'password_reset_flow.send_email': { openapi: 'sendPasswordResetEmail' },
  'password_reset_flow.link_sat': { openapi: 'linkPasswordResetFlowSat' },
  // MFA
  'mfa.start_enrollment': { openapi: 'startMfaEnrollment' },
  'mfa.finalize_enrollment': { openapi: 'finalizeMfaEnrollment' },
  'mfa.unenroll': { openapi: 'unenrollMfa' },
  // consent (its own listener)
  'consent.read': { openapi: 'readConsent' },
  'consent.update': { openapi: 'updateConsent' },
  // Undocumented: probes, metrics and the documentation itself (on every listener that serves them)
  'health.live': {},
  'health.ready': {},
  'metrics.read': {},
  'openapi.read': {},
  'docs.read': {},
  // The browser console's static files (public: the console holds no secret)
  'console.asset': {},
} satisfies Record<string, OperationSpec>

export type OperationId = keyof typeof CATALOG

export const OPERATIONS: Readonly<Record<OperationId, OperationSpec>> = CATALOG

export function isOperationId(value: unknown): value is OperationId {
  return typeof value === 'string' && Object.hasOwn(OPERATIONS, value)
}
