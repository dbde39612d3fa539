import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { IntegrityError } from '../crypto/aead.js'
import { AppError, ErrorType, errors } from '../lib/errors.js'
import { isDatabaseUnavailable, isStorageFull } from '../store/db-errors.js'
import { noteAuditReason } from './audit.js'
import { sendJson } from './common-hooks.js'
import { closeHttp1Connection } from './connections.js'
import { setHsts } from './hsts.js'

export interface Rendered {
  status: number
  type: string
  code: string
  message: string
  providerError?: Record<string, unknown> | undefined
  retryAfterSeconds?: number | undefined
}

/** A validation error names the field: `body/username must NOT have fewer than 1 characters`. */
function validationMessage(error: FastifyError): string {
  const first = error.validation?.[0]
  if (!first) return error.message
  const params = first.params as Record<string, unknown>
  const missing = typeof params.missingProperty === 'string' ? params.missingProperty : undefined
  const path = first.instancePath.replace(/^\//, '').replace(/\//g, '.')
  const field = missing ?? (path || error.validationContext || 'request')
  if (missing) return `${field} is required`
  if (first.keyword === 'format' && params.format === 'uuid') return `${field} must be a valid UUID`
  return `${field} ${first.message ?? 'is invalid'}`
}

export function render(raw: FastifyError | AppError | Error): Rendered {
  // A lost or refused database connection is retryable: 503 with Retry-After, never a 500.
  // A full disk is not a bug either: 507 STORAGE_FULL, so clients and operators know why.
  const error = isDatabaseUnavailable(raw)
    ? errors.databaseUnavailable(raw)
    : isStorageFull(raw)
      ? errors.storageFull(raw)
      : raw
  if (error instanceof AppError) {
    return {
      status: error.statusCode,
      type: error.type,
      code: error.code,
      message: error.message,
      providerError: error.providerError,
      retryAfterSeconds: error.retryAfterSeconds,
    }
  }
  if (error instanceof IntegrityError) {
    // Fail closed: tampered, moved or undecryptable data is never served, and says so.
    return {
      status: 500,
      type: ErrorType.api,
      code: 'DATA_INTEGRITY_FAILURE',
      message: 'Stored data failed its integrity check and was not served',
    }
  }
  const fe = error as FastifyError
  if (fe.validation) {
    return {
      status: 400,
      type: ErrorType.invalidRequest,
      code: 'INVALID_PARAMETER',
      message: validationMessage(fe),
    }
  }
  const status = fe.statusCode ?? 500
  if (status >= 400 && status < 500) {
    const type = status === 429 ? ErrorType.rateLimit : ErrorType.invalidRequest
    const code =
      status === 413
        ? 'PAYLOAD_TOO_LARGE'
        : status === 415
          ? 'UNSUPPORTED_MEDIA_TYPE'
          : 'INVALID_REQUEST'
    return { status, type, code, message: fe.message }
  }
  return { status: 500, type: ErrorType.api, code: 'INTERNAL', message: 'Internal server error' }
}

/**
 * A 5xx is logged with its cause. A lost database connection only by message and code: the
 * driver hangs its client (connection parameters, a password among them) on some of its errors.
 */
function logFailure(request: FastifyRequest, error: Error, rendered: Rendered): void {
  if (rendered.status < 500) return
  if (rendered.code === 'DATABASE_UNAVAILABLE') {
    const code = (error as { code?: unknown }).code
    request.log.warn(
      { error: error.message, ...(typeof code === 'string' ? { db_code: code } : {}) },
      'request failed: database unavailable',
    )
    return
  }
  if (rendered.code === 'STORAGE_FULL') {
    // Expected while the disk is full, one per refused write: no stack, the code says it all.
    const code = (error as { code?: unknown }).code
    request.log.warn(
      { ...(typeof code === 'string' ? { storage_code: code } : {}) },
      'request failed: storage full',
    )
    return
  }
  if (error instanceof AppError && error.logFields) {
    request.log.error({ ...error.logFields, code: error.code }, `request failed: ${error.message}`)
    return
  }
  request.log.error({ err: error }, 'request failed')
}

export function sendError(request: FastifyRequest, reply: FastifyReply, r: Rendered) {
  // A body over the limit may still be arriving: close the connection rather than read the rest.
  // So for any error answered before the body was read to its end (an upload refused on a full
  // disk): its unread bytes would sit before the next request on this keep-alive connection,
  // which then waited for ever (issue #18, writes and a read hanging until the client gave up).
  // (HTTP/1 only: an HTTP/2 stream's unread body goes with the stream, not the connection.)
  if (r.status === 413 || request.raw.complete === false) closeHttp1Connection(request, reply)
  noteAuditReason(request, r.code)
  if (r.retryAfterSeconds !== undefined) reply.header('retry-after', String(r.retryAfterSeconds))
  // Also here, not only in the onRequest hook: an error thrown by an earlier onRequest hook
  // (authentication) or by the router skips that hook (decisions.md 24: every answer).
  reply
    .code(r.status)
    .header('cache-control', 'no-store')
    .header('x-content-type-options', 'nosniff')
  setHsts(request, reply)
  return sendJson(reply, {
    result: 'error',
    transaction_id: request.id,
    error: {
      message: r.message,
      type: r.type,
      code: r.code,
      ...(r.providerError ? { provider_error: r.providerError } : {}),
    },
  })
}

/**
 * Errors the router answers before any route or hook runs (a malformed URL, a path parameter
 * over `maxParamLength`): in the envelope too, and without echoing the path back.
 */
export function frameworkErrorHandler(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const refusal = routerRefusal(error)
  if (refusal) return sendError(request, reply, refusal)
  const rendered = render(error)
  logFailure(request, error, rendered)
  return sendError(request, reply, rendered)
}

/** The answer to a URL the router refuses outright; undefined for any other framework error. */
export function routerRefusal(error: FastifyError): Rendered | undefined {
  const type = ErrorType.invalidRequest
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return { status: 414, type, code: 'URI_TOO_LONG', message: 'A path parameter is too long' }
  }
  if (error.code === 'FST_ERR_BAD_URL') {
    return { status: 400, type, code: 'INVALID_URL', message: 'The URL is malformed' }
  }
  return undefined
}

/**
 * One error handler for every route: deliberate errors keep their status and message, client
 * errors from Fastify keep their status, anything else is a 500 whose cause goes to the log only.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    const rendered = render(error)
    logFailure(request, error, rendered)
    return sendError(request, reply, rendered)
  })
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, {
      status: 404,
      type: ErrorType.notFound,
      code: 'ROUTE_NOT_FOUND',
      message: `No route for ${request.method} ${request.url.split('?')[0]}`,
    }),
  )
}
