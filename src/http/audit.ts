import { randomUUID } from 'node:crypto'
import type { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { operationsConsumed } from '../access/operations-consumed.js'
import type { Principal } from '../access/principal.js'
import { AuditContext, auditFailure, currentAudit, runWithAudit } from '../audit/context.js'
import { type AuditDecision, type AuditEventInput, NO_ACCOUNT } from '../audit/event.js'
import { type AuditWriter, AuditWriterClosed } from '../audit/writer.js'
import { isUuid } from '../lib/ids.js'
import { type Meter, noopMeter } from '../metrics/meter.js'
import { unverifiedCredentialRef } from './basic-auth.js'

const CONTEXT = Symbol('coffer.audit')
const PRESENTED = Symbol('coffer.auditPresented')
const REASON = Symbol('coffer.auditReason')

type Carrier = FastifyRequest & {
  [CONTEXT]?: AuditContext
  [REASON]?: string
  [PRESENTED]?: Principal
}

/** Called by authentication: the credential presented resolved to this principal. */
export function notePresentedPrincipal(request: FastifyRequest, principal: Principal): void {
  ;(request as Carrier)[PRESENTED] = principal
}

/** Path parameters that name a resource, and its kind in the event. Only UUIDs are kept. */
const PARAM_KINDS: Readonly<Record<string, string>> = {
  account_id: 'account',
  vault_id: 'vault',
  document_id: 'document',
  document_ids: 'document',
  blob_id: 'blob',
  schema_id: 'schema',
  user_id: 'user',
  user_ids: 'user',
  group_id: 'group',
  flow_id: 'password_reset_flow',
  token_id: 'scoped_access_token',
}

/** List and search routes: the kind of item their answer lists (ids read from the answer). */
const LIST_KINDS: Readonly<Record<string, string>> = {
  'vault.list': 'vault',
  'vault.list_by_account': 'vault',
  'document.list': 'document',
  'document.list_by_schema': 'document',
  'document.search': 'document',
  'document.search_legacy': 'document',
  'document.search_legacy_query': 'document',
  'user.list': 'user',
  'user.search': 'user',
  'group.list': 'group',
  'schema.list': 'schema',
  'blob.list': 'blob',
  'scoped_access_token.list': 'scoped_access_token',
  'password_reset_flow.list': 'password_reset_flow',
}

/** The item arrays of a list answer: top level, or one object down (`data.documents`, `…items`). */
function listedItems(payload: unknown): unknown[] {
  const found: unknown[] = []
  const visit = (value: unknown, depth: number) => {
    if (!value || typeof value !== 'object') return
    for (const v of Object.values(value as Record<string, unknown>)) {
      if (Array.isArray(v)) found.push(...v)
      else if (depth < 2) visit(v, depth + 1)
    }
  }
  visit(payload, 0)
  return found
}

/** The id of a listed item: `id`, or `<kind>_id` / `document_id` / `user_id` (search hits). */
function itemId(item: unknown, kind: string): string | undefined {
  if (!item || typeof item !== 'object') return undefined
  const o = item as Record<string, unknown>
  const id = o.id ?? o[`${kind}_id`] ?? o.document_id ?? o.user_id ?? o.group_id
  return typeof id === 'string' && isUuid(id) ? id : undefined
}

/** Called by the error handler: the error code the event gives as the reason. */
export function noteAuditReason(request: FastifyRequest, code: string): void {
  ;(request as Carrier)[REASON] = code
}

/** The route template and operation of an event for a request that matched no route. */
export const UNKNOWN_ROUTE = '(unknown)'
export const UNKNOWN_ROUTE_OPERATION = 'route.not_found'
/** The operation of an event for a URL the router refused before matching any route. */
export const REFUSED_ROUTE_OPERATION = 'route.refused'

/** A path as compared with the login routes': no query, lower case, no trailing slash. */
function loosePath(url: string): string {
  return (url.split('?')[0] ?? '').toLowerCase().replace(/\/+$/, '')
}

/**
 * Whether a request is audited: every request that presents a credential to a route that takes
 * one, and every login attempt (issue 13). A request with no `Authorization` header at all to a
 * route that needs one names nobody and touches nothing (401 before any lookup): it is not
 * audited (the request log has it). Public routes (health, docs) are not audited. A request
 * that matched no route (404) is audited when it presents a credential, or when its path is a
 * login route's (another method, a trailing slash, other case): a login attempt.
 */
function isAudited(request: FastifyRequest, loginPaths: ReadonlySet<string>): boolean {
  if (request.is404) {
    return request.headers.authorization !== undefined || loginPaths.has(loosePath(request.url))
  }
  const config = request.routeOptions.config
  if (config.operation === 'auth.login') return true
  const access = config.access
  if (!access || 'public' in access) return false
  return request.headers.authorization !== undefined
}

function successStatus(request: FastifyRequest): number {
  const response = request.routeOptions.schema?.response as Record<string, unknown> | undefined
  const codes = Object.keys(response ?? {})
    .map(Number)
    .filter((c) => c >= 200 && c < 300)
  return codes.length > 0 ? Math.min(...codes) : 200
}

function decisionOf(status: number): AuditDecision {
  return status < 400 ? 'allowed' : status < 500 ? 'denied' : 'error'
}

function buildEvent(
  request: FastifyRequest,
  context: AuditContext,
  status: number,
  reason: string | null,
): AuditEventInput {
  const principal = request.principal ?? (request as Carrier)[PRESENTED]
  const params = (request.params ?? {}) as Record<string, unknown>
  // The request's few parameters, not the whole table: this runs for every audited request.
  for (const name of Object.keys(params)) {
    const kind = Object.hasOwn(PARAM_KINDS, name) ? PARAM_KINDS[name] : undefined
    const value = params[name]
    if (kind === undefined || typeof value !== 'string') continue
    const ids = value.split(',').filter(isUuid)
    if (ids.length > 0) context.resources.add(kind, ids)
  }
  const consumed = operationsConsumed(request)
  const sat = principal?.kind === 'sat' ? principal : undefined
  const user = principal?.kind === 'user' ? principal : undefined
  return {
    accountId: principal?.accountId ?? context.account ?? NO_ACCOUNT,
    // Not lib/ids' newId: its monotonic state is shared with ids made at the service clock's
    // time (tests move that clock), and an event's id orders nothing.
    id: randomUUID(),
    at: new Date().toISOString(),
    transactionId: request.id,
    actorUserId: user?.userId ?? (sat ? null : context.user),
    credentialKind: sat ? 'sat' : (user?.via ?? null),
    // Twelve hex digits of the stored SHA-256 digest: tells credentials apart in the trail,
    // and is neither the secret nor enough to find it.
    credentialRef: user
      ? user.credentialDigest.slice(0, 12)
      : sat
        ? sat.satId
        : unverifiedCredentialRef(request.headers.authorization),
    satId: sat?.satId ?? null,
    satCreatorId: sat?.creatorId ?? null,
    clientIp: request.ip ?? null,
    method: request.method,
    // Never the path of a request that matched no route: a client's text, of any length.
    route: request.is404 ? UNKNOWN_ROUTE : (request.routeOptions.url ?? UNKNOWN_ROUTE),
    operation: request.is404
      ? UNKNOWN_ROUTE_OPERATION
      : (request.routeOptions.config.operation ?? UNKNOWN_ROUTE_OPERATION),
    resources: context.resources.toJSON(),
    decision: decisionOf(status),
    reason,
    status,
    operationsConsumed: consumed?.count ?? 0,
    operationsCategory: consumed?.category ?? null,
  }
}

function destroyStream(payload: unknown): void {
  const stream = payload as Partial<Readable> | null
  if (stream && typeof stream === 'object' && typeof stream.destroy === 'function') {
    stream.destroy()
  }
}

/** Headers of the answer that was to be sent and must not describe the refusal. */
const CONTENT_HEADERS = ['content-length', 'content-disposition', 'content-encoding', 'etag']

/**
 * The answer becomes 503 AUDIT_UNAVAILABLE in the envelope. Done here rather than by throwing:
 * an error thrown in `onSend` while an error is being answered would skip our error handler.
 */
function refuse(request: FastifyRequest, reply: FastifyReply, cause: unknown): string {
  const error = auditFailure(cause)
  request.log.error({ err: cause }, 'audit event not stored; request refused')
  noteAuditReason(request, error.code)
  for (const name of CONTENT_HEADERS) reply.removeHeader(name)
  reply
    .code(error.statusCode)
    .header('content-type', 'application/json')
    .header('retry-after', String(error.retryAfterSeconds ?? 1))
  return JSON.stringify({
    result: 'error',
    transaction_id: request.id,
    error: { message: error.message, type: error.type, code: error.code },
  })
}

/**
 * The audit trail's HTTP hooks (issue 13): each audited request runs in an AuditContext
 * (entered in onRequest, and again before the handler: the body arrives in the socket's
 * context); once the access rule let it in, its first write carries the event into the
 * database with it (store/auditing-driver.ts). Otherwise the event is stored in `onSend`,
 * through the group commit, before any byte of the answer leaves — JSON, errors and streamed
 * downloads alike. An event that cannot be stored turns the answer into 503 AUDIT_UNAVAILABLE.
 *
 * `registerAuditContext` goes first among the onRequest hooks that may fail (authentication);
 * `markAuditHandlerPhase` after the access rule and every other preHandler guard.
 */
export function registerAuditContext(
  app: FastifyInstance,
  writer: AuditWriter,
  meter: Meter = noopMeter,
): void {
  const state = auditState(app, writer, meter)
  // The login routes' paths, to know a login attempt that matched no route.
  app.addHook('onRoute', (route) => {
    if (route.config?.operation === 'auth.login') state.loginPaths.add(loosePath(route.url))
  })

  app.addHook('onRequest', (request, _reply, done) => {
    if (!isAudited(request, state.loginPaths)) return done()
    runWithAudit(openContext(request, state), done)
  })

  // What a list or search answered, from the answer itself (before it is serialised).
  app.addHook('preSerialization', (request, reply, payload, done) => {
    const context = (request as Carrier)[CONTEXT]
    const kind = LIST_KINDS[request.routeOptions.config.operation ?? '']
    if (context && kind && reply.statusCode < 300) {
      const ids: string[] = []
      for (const item of listedItems(payload)) {
        const id = itemId(item, kind)
        if (id) ids.push(id)
      }
      context.resources.add(kind, ids)
    }
    done(null, payload)
  })
}

interface AuditState {
  readonly writer: AuditWriter
  readonly meter: Meter
  readonly loginPaths: Set<string>
}

/** The audit hooks' shared state, one per app (both registrations take the same app). */
const states = new WeakMap<FastifyInstance, AuditState>()

function auditState(app: FastifyInstance, writer: AuditWriter, meter?: Meter): AuditState {
  let state = states.get(app)
  if (!state) {
    state = { writer, meter: meter ?? noopMeter, loginPaths: new Set() }
    states.set(app, state)
  }
  return state
}

function openContext(request: FastifyRequest, state: AuditState): AuditContext {
  const context: AuditContext = new AuditContext(
    (): AuditEventInput => buildEvent(request, context, successStatus(request), null),
    state.meter,
    (events) => state.writer.stored(events),
  )
  ;(request as Carrier)[CONTEXT] = context
  return context
}

/**
 * Stores the request's event before its answer goes out (the fail-closed point). Registered
 * after the metering hooks, so the event carries what the request consumed
 * (access/operations-consumed.ts), and before the count is taken, so a request whose event is
 * not stored counts nothing. A request answered before its audit context was opened — refused
 * by the shutdown gate, the first hook of all — gets one here: it is audited all the same, with
 * what its header says of its credential (nothing was authenticated).
 *
 * A callback hook, not an async one: no promise of its own per request on the hot path.
 */
export function addAuditAppend(app: FastifyInstance, writer: AuditWriter): void {
  const state = auditState(app, writer)
  app.addHook('onSend', (request, reply, payload, done) => {
    const carrier = request as Carrier
    let context = carrier[CONTEXT]
    if (!context) {
      if (!isAudited(request, state.loginPaths)) return done(null, payload)
      context = openContext(request, state)
    }
    if (context.stored || context.failed) return done(null, payload)
    const opened = context
    const status = reply.statusCode
    const reason = status >= 400 ? (carrier[REASON] ?? null) : null
    writer.enqueue(buildEvent(request, opened, status, reason), (error) => {
      if (error === undefined) {
        opened.stored = true
        done(null, payload)
        return
      }
      opened.failed = true
      // A request that already failed on the server's side (507 STORAGE_FULL, 503) keeps its
      // answer: nothing is served either way, and its cause is the more useful one. Anything
      // else — data, or a refusal that would let a caller probe credentials unrecorded — is not
      // sent.
      if (status >= 500) {
        if (error instanceof AuditWriterClosed)
          request.log.warn(
            { route: request.routeOptions.url ?? UNKNOWN_ROUTE, status },
            'audit event not stored: the audit trail is closed (shutting down)',
          )
        else request.log.error({ err: error }, 'audit event of a failed request not stored')
        done(null, payload)
        return
      }
      destroyStream(payload)
      done(null, refuse(request, reply, error))
    })
  })
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The handler says which of its writes carries the audit event (`auditWritesFromHere`):
     * a login writes counters and a used MFA code before the token it issues.
     */
    auditWrites?: 'explicit'
  }
}

export function markAuditHandlerPhase(app: FastifyInstance): void {
  app.addHook('preHandler', (request, _reply, done) => {
    const context = (request as Carrier)[CONTEXT]
    if (!context) return done()
    if (request.routeOptions.config.auditWrites !== 'explicit') context.inHandler = true
    // Entered again only when lost (a body read in the socket's context): a bodyless request
    // is still in it, and another `run` would cost an async scope for nothing.
    if (currentAudit() === context) done()
    else runWithAudit(context, done)
  })
}
