import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ActiveCredential, CredentialResolver } from '../access/credentials.js'
import {
  type Actor,
  type CredentialKind,
  credentialKind,
  type GrantsBuilder,
  type Principal,
  type ScopedTokenResolver,
  type UserPrincipal,
} from '../access/principal.js'
import { AppError, ErrorType, errors } from '../lib/errors.js'
import { acceptedKinds, assertOperation, vendingKinds } from './access.js'
import { notePresentedPrincipal } from './audit.js'
import { BASIC_PART_MAX, parseBasic } from './basic-auth.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller, or null (no credential, or one that did not resolve). */
    principal: Principal | null
    /** Set for routes with a `policy` rule: the caller and what they may do. */
    actor: Actor
  }
  interface FastifyInstance {
    /** `METHOD /path` of every route marked `vendsCredential` (what the SAT table test covers). */
    credentialRoutes: readonly string[]
  }
}

/** The ports the hooks need, implemented by the auth and SAT features and wired in src/deps.ts. */
export interface AuthDeps {
  credentials: CredentialResolver
  sats: ScopedTokenResolver
  authz: GrantsBuilder
}

/**
 * Principals already built, by the resolved credential they came from: the credentials cache
 * hands out the same frozen value until a right changes (then a new one), so a repeat caller's
 * principal (and, in AuthzService, its grants) is built once per cache entry, not per request.
 */
const withPoliciesBuilt = new WeakMap<object, UserPrincipal>()
const withoutPoliciesBuilt = new WeakMap<object, UserPrincipal>()

async function authenticate(
  deps: AuthDeps,
  header: string | undefined,
  withPolicies: boolean,
): Promise<Principal | null> {
  const basic = parseBasic(header)
  if (!basic || basic.user.length > BASIC_PART_MAX || basic.password.length > BASIC_PART_MAX)
    return null
  if (basic.password !== '') return deps.sats.resolve(basic.user, basic.password)
  if (withPolicies) {
    const found = await deps.credentials.resolveWithPolicies(basic.user)
    if (!found) return null
    let principal = withPoliciesBuilt.get(found)
    if (!principal) {
      principal = userPrincipal(found.credential, found.policies)
      withPoliciesBuilt.set(found, principal)
    }
    return principal
  }
  const credential = await deps.credentials.resolve(basic.user)
  if (!credential) return null
  let principal = withoutPoliciesBuilt.get(credential)
  if (!principal) {
    principal = userPrincipal(credential, undefined)
    withoutPoliciesBuilt.set(credential, principal)
  }
  return principal
}

/** Frozen: one principal may serve many requests. */
function userPrincipal(
  credential: ActiveCredential,
  groupPolicies: string[] | undefined,
): UserPrincipal {
  return Object.freeze({
    kind: 'user',
    via: credential.kind,
    accountId: credential.account_id,
    userId: credential.user_id,
    credentialDigest: credential.digest,
    user: Object.freeze({
      id: credential.user_id,
      account_id: credential.account_id,
      username: credential.username,
      status: credential.status,
      attributes: credential.attributes,
      mfa_enrolled: credential.mfa_enrolled,
    }),
    ...(groupPolicies ? { groupPolicies } : {}),
  })
}

function kindNotAllowed(allowed: CredentialKind[]): AppError {
  return errors.credentialKindNotAllowed(allowed.map((k) => k.replace('_', ' ')).join(' or '))
}

function unauthenticated(status: 400 | 401 | undefined): AppError {
  return status === 400 ? errors.invalidAuthorization() : errors.unauthenticated()
}

/**
 * onRoute: a route without an access rule or an operation id stops the server from starting.
 * onRequest: credential → principal. preHandler: the route's rule is enforced.
 */
export function registerAuthHooks(app: FastifyInstance, deps: AuthDeps): void {
  app.decorateRequest('principal', null)
  app.decorateRequest('actor', null as unknown as Actor)
  const credentialRoutes: string[] = []
  app.decorate('credentialRoutes', credentialRoutes)

  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/docs')) {
      route.config = {
        ...route.config,
        access: { public: true },
        operation: 'docs.read',
        envelope: false,
      }
      return
    }
    if (!route.config?.access)
      throw new Error(`route ${route.method} ${route.url} declares no access rule`)
    assertOperation(route)
    if (route.config.vendsCredential) {
      if ('public' in route.config.access)
        throw new Error(`route ${route.method} ${route.url} vends credentials without one`)
      for (const method of [route.method].flat()) credentialRoutes.push(`${method} ${route.url}`)
    }
  })

  // Credentials are checked before the body is read: an anonymous client never makes us parse
  // a multipart body. The policy needs the validated request, so it waits for preHandler.
  app.addHook('onRequest', async (request) => {
    const access = request.routeOptions.config.access
    if (!access || 'public' in access) return
    const principal = await authenticate(deps, request.headers.authorization, 'policy' in access)
    if (!principal) throw unauthenticated(access.invalidStatus)
    // The audit trail names whoever presented a valid credential, even of a refused kind.
    notePresentedPrincipal(request, principal)
    const allowed = acceptedKinds(access)
    if (!allowed.includes(credentialKind(principal))) {
      if (access.invalidStatus === 400) throw errors.invalidAuthorization()
      throw kindNotAllowed(allowed)
    }
    request.principal = principal
  })

  app.addHook('preHandler', async (request: FastifyRequest) => {
    const access = request.routeOptions.config.access
    if (!access || 'public' in access) return
    const principal = request.principal
    if (!principal) throw errors.unauthenticated()
    // A credential is vended or changed only for the kinds the route names for this request
    // (default: API key only); a SAT can never turn itself into a wider or longer credential.
    const vending = vendingKinds(request)
    if (vending && !vending.includes(credentialKind(principal))) throw kindNotAllowed(vending)
    if ('policy' in access) {
      const grants = await deps.authz.grantsFor(principal)
      request.actor = { principal, grants }
      // A caller whose groups grant nothing gets 401 everywhere, whatever the route's 404 rule.
      if (grants.isEmpty) throw errors.permissionDenied()
      if (!grants.satisfies(access.policy(request))) {
        if (access.deniedStatus === 404)
          throw new AppError(404, ErrorType.notFound, 'NOT_FOUND', 'Not found')
        throw access.denied?.(request, grants) ?? errors.permissionDenied()
      }
    }
    // A SAT use is taken only for a request that is let through (valid input, permitted), in
    // one atomic update: past `allowed_uses` every further request is refused, on any node.
    if (principal.kind === 'sat' && !(await deps.sats.consume(principal))) {
      throw errors.unauthenticated()
    }
  })
}
