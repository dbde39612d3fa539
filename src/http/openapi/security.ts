import type { FastifyContextConfig } from 'fastify'
import type { CredentialKind } from '../../access/principal.js'
import { API_KEY_ONLY, acceptedKinds } from '../access.js'
import type { RouteTransform, SecurityScheme } from './document.js'

/** One security scheme per credential kind, so each operation can name exactly the kinds it takes. */
export const SCHEME_OF_KIND: Record<CredentialKind, string> = {
  api_key: 'ApiKey',
  access_token: 'AccessToken',
  sat: 'ScopedAccessToken',
}

/** All three are HTTP Basic, told apart by the server (a non-empty password means a SAT). */
export const CREDENTIAL_SCHEMES: Record<string, SecurityScheme> = {
  [SCHEME_OF_KIND.api_key]: {
    type: 'http',
    scheme: 'basic',
    description:
      "HTTP Basic with a user's API key as the user name and an empty password. Does not " +
      'expire; most routes that vend or change credentials take only this one.',
  },
  [SCHEME_OF_KIND.access_token]: {
    type: 'http',
    scheme: 'basic',
    description:
      'HTTP Basic with an access token (from POST /v1/auth/login or POST ' +
      '/v1/users/{user_id}/access_token) as the user name and an empty password. Expires (24 ' +
      'hours by default).',
  },
  [SCHEME_OF_KIND.sat]: {
    type: 'http',
    scheme: 'basic',
    description:
      "HTTP Basic with a scoped access token's `http_auth.username` as the user name and " +
      '`http_auth.password` as the password (both from POST /v1/scoped_access_tokens). Limited to ' +
      'its own policy, uses and expiry.',
  },
}

/**
 * The credential kinds a route takes, from its live access rule (what the auth hooks enforce):
 * none when public; a route that vends credentials with `true` takes an API key only. A vending
 * function narrows per request (the user update by the fields it changes), so the route's full
 * set is shown.
 */
export function documentedKinds(config: FastifyContextConfig | undefined): CredentialKind[] {
  const access = config?.access
  if (!access || 'public' in access) return []
  const kinds = acceptedKinds(access)
  return config?.vendsCredential === true ? kinds.filter((k) => API_KEY_ONLY.includes(k)) : kinds
}

/** `security` of each operation: `[]` (public) or one alternative per accepted kind. */
export const securityFromAccess: RouteTransform = ({ schema, route }) => {
  schema.security = documentedKinds(route.config).map((kind) => ({ [SCHEME_OF_KIND[kind]]: [] }))
}
