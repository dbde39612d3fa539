import { describe, expect, it } from 'vitest'
import type { OpenApiDocument } from './document.js'
import { generatedOperationId, NAMED_OPERATIONS, operationIds } from './operation-ids.js'

describe('generatedOperationId', () => {
  it.each([
    ['post', '/v1/vaults', 'createVault'],
    ['get', '/v1/vaults', 'listVaults'],
    ['get', '/v1/vaults/{vault_id}', 'readVault'],
    ['put', '/v1/vaults/{vault_id}', 'updateVault'],
    ['delete', '/v1/vaults/{vault_id}', 'deleteVault'],
    // A parent whose id only scopes a child collection is left out.
    ['get', '/v1/vaults/{vault_id}/documents', 'listDocuments'],
    ['post', '/v1/vaults/{vault_id}/documents', 'createDocument'],
    // A list of ids reads the plural; versions after v1 are a suffix.
    ['get', '/v1/vaults/{vault_id}/documents/{document_ids}', 'readDocuments'],
    ['get', '/v2/vaults/{vault_id}/documents/{document_ids}', 'readDocumentsV2'],
    ['put', '/v2/vaults/{vault_id}/documents/{document_id}', 'updateDocumentV2'],
    // A sub-resource of one item keeps its parent.
    ['put', '/v1/vaults/{vault_id}/documents/{document_id}/owner', 'updateDocumentOwner'],
    ['put', '/v1/users/{user_id}/password', 'updateUserPassword'],
    ['post', '/v1/users/{user_id}/api_key', 'createUserApiKey'],
    ['get', '/v2/users/{user_ids}', 'readUsersV2'],
    ['post', '/v1/scoped_access_tokens', 'createScopedAccessToken'],
    ['get', '/v1/password_reset_flows/{flow_id}', 'readPasswordResetFlow'],
    ['get', '/api/v1/cmp/consent', 'readCmpConsent'],
  ])('%s %s → %s', (method, path, name) => {
    expect(generatedOperationId(method, path)).toBe(name)
  })
})

describe('operationIds', () => {
  const doc = (): OpenApiDocument => ({
    openapi: '3.1.0',
    paths: {
      '/v1/auth/login': { post: { responses: {} } },
      '/v1/vaults': { get: { responses: {} }, post: { operationId: 'ownName' } },
    },
  })

  it('takes the route’s own name, then the table’s, then the rule’s', () => {
    const d = doc()
    operationIds(d)
    expect(d.paths['/v1/auth/login']?.post?.operationId).toBe(
      NAMED_OPERATIONS['POST /v1/auth/login'],
    )
    expect(d.paths['/v1/vaults']?.get?.operationId).toBe('listVaults')
    expect(d.paths['/v1/vaults']?.post?.operationId).toBe('ownName')
  })

  it('names in the table are camelCase and unique', () => {
    const names = Object.values(NAMED_OPERATIONS)
    for (const name of names) expect(name).toMatch(/^[a-z][A-Za-z0-9]*$/)
    expect(new Set(names).size).toBe(names.length)
  })
})
