import type { FastifyRequest, RouteOptions } from 'fastify'
import { isOperationId, type OperationId } from '../access/operations.js'
import type { CredentialKind } from '../access/principal.js'
import type { AppError } from '../lib/errors.js'
import type { Grants, Requirement } from '../policy/index.js'

/**
 * Every route declares exactly one access rule (docs/architecture.md, Request flow); the server
 * refuses to start when one is missing.
 * - `public`: no credential (login, docs).
 * - `self`: any accepted credential acting on its own session or user.
 * - `policy`: a requirement built from the validated request, checked against the caller's grants.
 * `credentials` narrows the accepted kinds (default: API key and access token); `invalidStatus`
 * is the status for a missing or invalid credential (the spec says 400 on /v1/auth/me).
 */
export type Access =
  | { public: true }
  | { self: true; credentials?: CredentialKind[]; invalidStatus?: 400 | 401 }
  | {
      policy: (request: FastifyRequest) => Requirement
      credentials?: CredentialKind[]
      invalidStatus?: 400 | 401
      /** Status when the requirement is not met: 401 (default) or 404 where the spec says so. */
      deniedStatus?: 401 | 404
      /**
       * The error for a 401 refusal, where the route can say precisely which grant is missing
       * (default: the generic PERMISSION_DENIED). It must depend only on the request and the
       * caller's grants, never on stored data, so a refusal reveals nothing about it.
       */
      denied?: (request: FastifyRequest, grants: Grants) => AppError
    }

export const USER_CREDENTIALS: CredentialKind[] = ['api_key', 'access_token']
export const ANY_CREDENTIAL: CredentialKind[] = ['api_key', 'access_token', 'sat']
export const API_KEY_ONLY: CredentialKind[] = ['api_key']

/**
 * The credential kinds a route accepts when it names none: policy-checked routes take SATs too
 * (a SAT's policy and its creator's bound what it may do); `self` routes act on a user's own
 * session, which a SAT does not have. The auth hooks enforce it; the OpenAPI document shows it.
 */
export function acceptedKinds(access: Exclude<Access, { public: true }>): CredentialKind[] {
  return access.credentials ?? ('policy' in access ? ANY_CREDENTIAL : USER_CREDENTIALS)
}

/** The credential kinds a credential-vending route accepts for this request (see `vendsCredential`). */
export function vendingKinds(request: FastifyRequest): CredentialKind[] | undefined {
  const vends = request.routeOptions.config.vendsCredential
  if (vends === undefined) return undefined
  return vends === true ? API_KEY_ONLY : vends(request)
}

/**
 * onRoute, on every listener: a route that names no operation of the catalog
 * (src/access/operations.ts) stops the server from starting, as a missing access rule does.
 */
export function assertOperation(route: Pick<RouteOptions, 'method' | 'url' | 'config'>): void {
  if (!isOperationId(route.config?.operation))
    throw new Error(`route ${route.method} ${route.url} declares no operation of the catalog`)
}

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access
    /** The route's operation id (src/access/operations.ts): what it is counted and audited as. */
    operation?: OperationId
    /** v1 form route: merge query-string parameters into the body, trim field names. */
    form?: boolean
    /** False for the few JSON answers that are not in the envelope (the OpenAPI document). */
    envelope?: boolean
    /**
     * Marks a route that vends or changes a credential (access token, API key, access/secret key
     * pair, password). Such a request is API-key-only — the project rule, decision 49 — unless a
     * function names the kinds *this* request accepts (the general user update decides by the
     * fields it changes). Checked once the body is valid and before the policy, so a refused SAT
     * spends no use. A test sends every marked route a SAT request that would vend or change a
     * credential, so a new credential route cannot be forgotten.
     */
    vendsCredential?: true | ((request: FastifyRequest) => CredentialKind[])
  }
}
