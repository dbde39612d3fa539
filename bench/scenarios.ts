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
      note: 'argon2id verify at OWASP cost (m=19 MiB, t=2) on the 4-thread libuv pool, by design',
    },
  ]
}
