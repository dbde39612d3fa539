/** The measured requests, in run order. */
import type { CofferServerInfo } from './protocol.js'

export interface Scenario {
  name: string
  server: 'bare' | 'coffer'
  method: 'GET' | 'POST'
  path: string
  headers: Record<string, string>
  /** A static body, or a function called once per request (for unique fields). */
  body?: string | (() => string)
  /** Why this scenario may be far below bare by design (printed with the results). */
  note?: string
}

const FORM = 'application/x-www-form-urlencoded'
const JSON_TYPE = 'application/json'

function basic(user: string, password = ''): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`
}

export const bareScenario: Scenario = {
  name: 'bare GET /',
  server: 'bare',
  method: 'GET',
  path: '/',
  headers: {},
}

export function cofferScenarios(info: CofferServerInfo): Scenario[] {
  const admin = { authorization: basic(info.adminApiKey) }
  // Unique per request across warm-up and measurement (the server rejects taken usernames).
  let counter = 0
  const runId = Date.now().toString(36)
  return [
    {
      name: 'GET /v1/auth/me',
      server: 'coffer',
      method: 'GET',
      path: '/v1/auth/me',
      headers: admin,
    },
    {
      name: 'GET /v2/users/{id}',
      server: 'coffer',
      method: 'GET',
      path: `/v2/users/${info.loginUser.id}`,
      headers: admin,
    },
    {
      name: 'POST /v1/users',
      server: 'coffer',
      method: 'POST',
      path: '/v1/users',
      headers: { ...admin, 'content-type': FORM },
      // No password: argon2 is not measured here.
      body: () => new URLSearchParams({ username: `bench-${runId}-${++counter}` }).toString(),
    },
    {
      name: 'POST /v1/auth/login',
      server: 'coffer',
      method: 'POST',
      path: '/v1/auth/login',
      headers: { 'content-type': FORM },
      body: new URLSearchParams({
        account_id: info.accountId,
        username: info.loginUser.username,
        password: info.loginUser.password,
      }).toString(),
      note: 'argon2id verify at OWASP cost (m=19 MiB, t=2), at most COFFER_ARGON2_MAX_CONCURRENT at once (1 on 2 cores: file I/O keeps its threads), by design',
    },
    {
      name: 'POST /v2/vaults/{v}/documents',
      server: 'coffer',
      method: 'POST',
      // Its own vault: the read vault below keeps its fixed size however fast this runs.
      path: `/v2/vaults/${info.writeVaultId}/documents`,
      headers: { ...admin, 'content-type': JSON_TYPE },
      body: JSON.stringify({
        document: { name: 'Ada Lovelace', email: 'ada@example.com', age: 36, tags: ['bench'] },
      }),
    },
    {
      name: 'GET /v2/vaults/{v}/documents/{id}',
      server: 'coffer',
      method: 'GET',
      path: `/v2/vaults/${info.vaultId}/documents/${info.documentId}`,
      headers: admin,
    },
    {
      name: 'GET /v1/vaults/{v}/documents/{id}',
      server: 'coffer',
      method: 'GET',
      path: `/v1/vaults/${info.vaultId}/documents/${info.documentId}`,
      headers: admin,
      note: 'deprecated single read: the bare base64 text of the document, not JSON',
    },
    {
      name: 'GET /v1/vaults/{v}/documents?full=true&per_page=100',
      server: 'coffer',
      method: 'GET',
      path: `/v1/vaults/${info.vaultId}/documents?full=true&per_page=100`,
      headers: admin,
      note: `one page of 100 of the vault's ${info.documentCount} documents, each decrypted and base64-encoded`,
    },
  ]
}
