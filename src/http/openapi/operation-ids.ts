import type { DocumentTransform } from './document.js'
import { operationsOf } from './document.js'

/**
 * Operations whose generated name would be wrong or collide: actions the path spells as a noun
 * (`/auth/login`, `/documents/{id}/reindex`), and second paths to one resource. Keyed by
 * `METHOD path` as the document shows it, before template names are unified; a test fails on a
 * key that names no operation, so the table cannot go stale.
 */
export const NAMED_OPERATIONS: Record<string, string> = {
  'POST /v1/auth/login': 'login',
  'POST /v1/auth/logout': 'logout',
  'POST /v1/auth/logout_all': 'logoutAll',
  'GET /v1/auth/me': 'readCurrentUser',
  'PUT /v1/auth/me': 'updateCurrentUser',
  'POST /v1/groups/{group_id}/membership': 'addGroupMembers',
  'DELETE /v1/groups/{group_id}/membership/{user_ids}': 'removeGroupMembers',
  'GET /v1/accounts/{account_id}/vaults': 'listAccountVaults',
  'GET /v1/accounts/{account_id}/settings': 'readAccountSettings',
  'PUT /v1/accounts/{account_id}/settings': 'updateAccountSettings',
  'GET /v1/vaults/{vault_id}/schemas/{schema_id}/documents': 'listSchemaDocuments',
  'POST /v1/vaults/{vault_id}/documents/{document_id}/reindex': 'reindexDocument',
  'POST /v1/vaults/{vault_id}/blobs': 'uploadBlob',
  'PUT /v1/vaults/{vault_id}/blobs/{blob_id}': 'replaceBlob',
  'GET /v1/vaults/{vault_id}/blobs/{blob_id}': 'downloadBlob',
  'POST /v1/vaults/{vault_id}/search': 'searchDocuments',
  'POST /v1/vaults/{vault_id}/': 'searchDocumentsLegacy',
  'GET /v1/vaults/{vault_id}/': 'searchDocumentsLegacyQuery',
  'POST /v1/users/search': 'searchUsers',
  'POST /v1/users/{user_id}/message/email': 'sendUserEmail',
  'POST /v1/users/{user_id}/message/sms': 'sendUserSms',
  'POST /v1/password_reset_flows/{flow_id}/email': 'sendPasswordResetEmail',
  'POST /v1/password_reset_flows/{flow_id}/link_sat': 'linkPasswordResetFlowSat',
  'POST /v1/users/{user_id}/mfa/start_enrollment': 'startMfaEnrollment',
  'POST /v1/users/{user_id}/mfa/finalize_enrollment': 'finalizeMfaEnrollment',
  'POST /v1/users/{user_id}/mfa/unenroll': 'unenrollMfa',
  'GET /api/v1/cmp/consent': 'readConsent',
  'POST /api/v1/cmp/consent': 'updateConsent',
}

const VERB: Record<string, string> = {
  get: 'read',
  post: 'create',
  put: 'update',
  patch: 'update',
  delete: 'delete',
}

const isTemplate = (segment: string) => segment.startsWith('{')
/** `users`, `scoped_access_tokens`: a collection (good enough for our paths; not `sms`). */
const isPlural = (word: string) => word.endsWith('s') && !word.endsWith('ss')
const singular = (word: string) => (isPlural(word) ? word.slice(0, -1) : word)
const pascal = (word: string) =>
  word
    .split('_')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('')

/**
 * The name a path earns by rule: a verb from the method (a GET of a collection is `list`) and the
 * resource from the path's words. A collection addressed by one id is singular (`readVault`), by
 * a list of ids plural (`readDocuments`); a parent whose id only scopes a child collection is
 * left out (`/vaults/{vault_id}/documents` → `listDocuments`); versions after v1 are a suffix
 * (`createDocumentV2`).
 */
export function generatedOperationId(method: string, path: string): string {
  const segments = path.split('/').filter((s) => s !== '')
  if (segments[0] === 'api') segments.shift()
  const version = /^v\d+$/.test(segments[0] ?? '') ? (segments.shift() as string) : 'v1'
  const words: string[] = []
  segments.forEach((segment, i) => {
    if (isTemplate(segment)) return
    const next = segments[i + 1]
    if (next === undefined || !isTemplate(next)) {
      words.push(segment)
      return
    }
    const after = segments[i + 2]
    if (after !== undefined && !isTemplate(after) && isPlural(after)) return
    words.push(next.endsWith('_ids}') ? segment : singular(segment))
  })
  const last = segments[segments.length - 1] ?? ''
  const lastWord = words[words.length - 1] ?? ''
  let verb = VERB[method] ?? method
  if (!isTemplate(last) && isPlural(lastWord)) {
    if (method === 'get') verb = 'list'
    else words[words.length - 1] = singular(lastWord)
  }
  const suffix = version === 'v1' ? '' : pascal(version)
  return `${verb}${words.map(pascal).join('')}${suffix}`
}

/**
 * Every operation gets an `operationId` (the name generated clients give its function): the
 * route's own if it declares one, else the table's, else the rule's. Runs before template names
 * are unified, so the table's keys are the routes' paths.
 */
export const operationIds: DocumentTransform = (doc) => {
  for (const [path, method, operation] of operationsOf(doc)) {
    operation.operationId ??=
      NAMED_OPERATIONS[`${method.toUpperCase()} ${path}`] ?? generatedOperationId(method, path)
  }
}
