import { randomUUID } from 'node:crypto'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { auditFailure } from '../audit/context.js'
import { type AuditEventInput, NO_ACCOUNT } from '../audit/event.js'
import type { AuditWriter } from '../audit/writer.js'
import { REFUSED_ROUTE_OPERATION, UNKNOWN_ROUTE } from './audit.js'
import { unverifiedCredentialRef } from './basic-auth.js'
import { frameworkErrorHandler, render, routerRefusal, sendError } from './errors.js'

/**
 * The router's own refusals (a malformed URL: 400 INVALID_URL; a path parameter over
 * `maxParamLength`: 414 URI_TOO_LONG) are answered before any route or hook runs, so the audit
 * hooks never see them. One that presents a credential is audited here instead, as a 404 is
 * (decisions.md 191, 223): no lookup, the path never kept, stored before the answer goes out,
 * and 503 in its place when it cannot be stored. Without an `Authorization` header it is not
 * audited (no login path can be a URL the router cannot read).
 */
export function auditedFrameworkErrors(writer: AuditWriter) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const refusal = routerRefusal(error)
    if (!refusal || request.headers.authorization === undefined) {
      frameworkErrorHandler(error, request, reply)
      return
    }
    writer.enqueue(routerRefusalEvent(request, refusal.status, refusal.code), (failure) => {
      if (failure === undefined) {
        sendError(request, reply, refusal)
        return
      }
      request.log.error({ err: failure }, 'audit event not stored; request refused')
      sendError(request, reply, render(auditFailure(failure)))
    })
  }
}

function routerRefusalEvent(
  request: FastifyRequest,
  status: number,
  reason: string,
): AuditEventInput {
  return {
    accountId: NO_ACCOUNT,
    id: randomUUID(),
    at: new Date().toISOString(),
    transactionId: request.id,
    actorUserId: null,
    credentialKind: null,
    credentialRef: unverifiedCredentialRef(request.headers.authorization),
    satId: null,
    satCreatorId: null,
    clientIp: request.ip ?? null,
    method: request.method,
    route: UNKNOWN_ROUTE,
    operation: REFUSED_ROUTE_OPERATION,
    resources: {},
    decision: 'denied',
    reason,
    status,
    operationsConsumed: 0,
    operationsCategory: null,
  }
}
