import { randomUUID } from 'node:crypto'
import swagger from '@fastify/swagger'
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify'
import type { TrustProxy } from './config.js'
import { DEFAULT_HSTS_MAX_AGE_SECONDS } from './config-tls.js'
import type { Deps } from './deps.js'
import { assertOperation } from './http/access.js'
import { addRequestLog, addResponseHeaders, JSON_TYPE, sendJson } from './http/common-hooks.js'
import { closeHttp1Connection } from './http/connections.js'
import { addCors, CONSENT_CORS } from './http/cors.js'
import { addHsts, setHsts } from './http/hsts.js'
import { addInputGuard } from './http/input-guard.js'
import { type LogOptions, loggerOptions } from './http/logging.js'
import { type AppMetrics, addRequestMetrics, metricsRoute } from './http/metrics.js'
import { CONSENT_DOCUMENT, serveDocument, swaggerOptions } from './http/openapi/index.js'
import {
  addRequestDeadline,
  DEFAULT_REQUEST_DEADLINES,
  type RequestDeadlines,
} from './http/request-deadline.js'
import { addShutdownGate } from './http/shutdown.js'
import type { TlsMaterial } from './http/tls-material.js'
import { fastifyTlsOptions, prepareTlsServer } from './http/tls-server.js'
import { fastifyTrustProxy } from './http/trust-proxy.js'
import { AppError } from './lib/errors.js'
import { consentRoutes } from './modules/consent/consent.routes.js'
import { ConsentError, consentErrors } from './modules/consent/consent-errors.js'
import { DEFAULT_PRUNE_INTERVAL_MS, schedulePruning } from './modules/consent/consent-pruning.js'
import {
  addConsentRateLimits,
  type ConsentRateLimits,
  DEFAULT_CONSENT_RATE_LIMITS,
} from './modules/consent/consent-rate-limit.js'
import { healthRoutes } from './modules/health/health.routes.js'
import { isDatabaseUnavailable, isStorageFull } from './store/db-errors.js'

export interface ConsentAppOptions {
  /** Pino options (`stream` lets tests read the log). */
  logger?: boolean | LogOptions
  /** Log through this logger instead (the main app's, when one process serves both). */
  loggerInstance?: FastifyBaseLogger
  /** Consent bodies are a token and five booleans: 16 KiB is plenty. */
  bodyLimit?: number
  /** Flood limits per client address and per shop (COFFER_CONSENT_RATE_LIMIT_*). */
  rateLimit?: ConsentRateLimits
  /** How often unchosen records are pruned (COFFER_CONSENT_PRUNE_INTERVAL_SECONDS). */
  pruneIntervalMs?: number
  /** Which proxies' X-Forwarded-For to believe, as on the main API (config.ts TrustProxy). */
  trustProxy?: TrustProxy
  /** Browser origins allowed to call it (COFFER_CONSENT_CORS_ORIGINS); default none: no CORS. */
  cors?: { origins: readonly string[]; maxAgeSeconds: number }
  /** Deadline of each request's database work (COFFER_REQUEST_TIMEOUT_MS). */
  deadlines?: RequestDeadlines
  /** Request metrics and `GET /metrics` (http/metrics.ts); default none. */
  metrics?: AppMetrics
  /** Native TLS (HTTPS and HTTP/2 by ALPN, http/tls-server.ts); default plain HTTP. */
  tls?: TlsMaterial
  /** HSTS max-age on answers over TLS (COFFER_HSTS_MAX_AGE_SECONDS); default one year. */
  hstsMaxAgeSeconds?: number
}

/** `{"error": "<message>"}` with the status: the consent interface's error body (spec). */
function sendConsentError(reply: FastifyReply, status: number, message: string) {
  if (status === 413) closeHttp1Connection(reply.request, reply)
  reply.code(status).header('cache-control', 'no-store').header('x-content-type-options', 'nosniff')
  setHsts(reply.request, reply)
  return sendJson(reply, { error: message })
}

function handleError(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  // Our own 503s (a request past its deadline, a lost database, not ready, shutting down):
  // retryable, and their messages are ours, so safe to show.
  if (error instanceof AppError && error.statusCode === 503) {
    reply.header('retry-after', String(error.retryAfterSeconds ?? 1))
    return sendConsentError(reply, 503, error.message)
  }
  // A lost database connection met outside our mapping: retryable, never a 500. Logged by
  // message only (pg hangs its client, connection parameters included, on some errors).
  if (isDatabaseUnavailable(error)) {
    request.log.warn({ error: error.message }, 'consent request failed: database unavailable')
    reply.header('retry-after', '1')
    return sendConsentError(reply, 503, 'Service temporarily unavailable; try again shortly')
  }
  // A full disk (SQLITE_FULL, ENOSPC, PostgreSQL 53100): nothing was stored; a public caller
  // learns only that the service cannot take it now, never a stack or a 500.
  if (isStorageFull(error)) {
    request.log.warn({ error: error.message }, 'consent request failed: storage full')
    return sendConsentError(reply, 503, 'Service temporarily unavailable; try again later')
  }
  if (error instanceof ConsentError) {
    if (error.statusCode >= 500) request.log.error({ err: error }, 'consent request failed')
    return sendConsentError(reply, error.statusCode, error.message)
  }
  const status = (error as FastifyError).statusCode ?? 500
  // Never echo the URL back (its query may hold an email).
  if ((error as FastifyError).code === 'FST_ERR_BAD_URL') {
    return sendConsentError(reply, 400, 'The URL is malformed')
  }
  if (status === 413) return sendConsentError(reply, 413, 'Request body is too large')
  if (status >= 400 && status < 500) return sendConsentError(reply, status, error.message)
  request.log.error({ err: error }, 'consent request failed')
  return sendConsentError(reply, 500, 'Internal server error')
}

/**
 * The consent API (spec, Consent endpoints): its own Fastify instance and listener, only the
 * consent routes, its own error body. Nothing of the main API is reachable here, and the main
 * app never mounts these routes.
 */
export async function buildConsentApp(
  deps: Deps,
  options: ConsentAppOptions = {},
): Promise<FastifyInstance> {
  // A shared logger instance already carries the main app's serializers and redaction.
  const logger = options.loggerInstance ? true : loggerOptions(options.logger)
  const app = Fastify({
    ...(options.loggerInstance ? { loggerInstance: options.loggerInstance } : { logger }),
    // The query string holds customer emails: one line per request from the hook below, with
    // the route pattern only.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    bodyLimit: options.bodyLimit ?? 16_384,
    trustProxy: fastifyTrustProxy(options.trustProxy),
    // A GET creates a record: HEAD must not do so silently.
    exposeHeadRoutes: false,
    // Requests that reach a closing app get our 503 body (http/shutdown.ts), not Fastify's.
    return503OnClosing: false,
    frameworkErrors: (error, request, reply) => handleError(error, request, reply),
    // A request too malformed to parse never reaches the app: answer it in the consent shape,
    // uncached, as every other answer.
    clientErrorHandler: (_error, socket) => {
      if (socket.destroyed || !socket.writable) return
      const body = JSON.stringify({ error: 'Bad request' })
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nContent-Type: ${JSON_TYPE}\r\n` +
          `Cache-Control: no-store\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `Connection: close\r\n\r\n${body}`,
      )
    },
    // Typed as an HTTP/1 app whatever the server: routes and hooks see the same request API.
    ...(options.tls ? (fastifyTlsOptions(options.tls) as object) : {}),
  }) as FastifyInstance
  if (options.tls) prepareTlsServer(app)

  // Whatever the content type (sendBeacon sends text/plain), a body is JSON or a 400.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8')
    if (text.trim() === '') {
      done(null, undefined)
      return
    }
    try {
      done(null, JSON.parse(text))
    } catch {
      done(consentErrors.invalidJson(), undefined)
    }
  })

  // Before any route is added: a route keeps the error handler it was registered under.
  app.setErrorHandler(handleError)
  app.setNotFoundHandler((_request, reply) => sendConsentError(reply, 404, 'Not found'))
  // Security headers, then CORS (a preflight is answered in its onRequest hook, so before the
  // flood limits: preflights cost no database work and are not counted).
  addResponseHeaders(app)
  addHsts(app, {
    maxAgeSeconds: options.hstsMaxAgeSeconds ?? DEFAULT_HSTS_MAX_AGE_SECONDS,
    tls: options.tls !== undefined,
  })
  await addCors(app, {
    origins: options.cors?.origins ?? [],
    maxAgeSeconds: options.cors?.maxAgeSeconds ?? 0,
    ...CONSENT_CORS,
    refusal: () => new ConsentError(403, 'Origin not allowed'),
  })
  app.addHook('onRoute', (route) => {
    const access = route.config?.access
    if (!access || !('public' in access)) {
      throw new Error(`consent route ${route.method} ${route.url} must declare public access`)
    }
    assertOperation(route)
  })
  // Before the rate limits' onRequest hook: a request refused at shutdown does no work.
  addShutdownGate(app, deps.health)
  if (options.metrics) addRequestMetrics(app, options.metrics.metrics, 'consent')
  // First: the rate limits' and routes' hooks run under the deadline.
  addRequestDeadline(app, options.deadlines ?? DEFAULT_REQUEST_DEADLINES, deps.store.dialect)
  addInputGuard(app)
  if (logger !== false) addRequestLog(app, 'consent request')

  await addConsentRateLimits(app, options.rateLimit ?? DEFAULT_CONSENT_RATE_LIMITS)
  // Its own document (no /docs page: see docs/decisions.md); before the routes it describes.
  await app.register(swagger, swaggerOptions(CONSENT_DOCUMENT))
  serveDocument(app)
  await consentRoutes(app, deps.consent)
  await healthRoutes(app, deps.health)
  if (options.metrics?.serve) metricsRoute(app, options.metrics.metrics, options.metrics.token)
  // The listener that creates records removes those nobody chose for (consent.service.ts).
  const pruning = schedulePruning(
    deps.consent,
    options.pruneIntervalMs ?? DEFAULT_PRUNE_INTERVAL_MS,
    {
      pruned: (count) => app.log.info({ count }, 'expired unchosen consent records'),
      failed: (err) => app.log.error({ err }, 'pruning unchosen consent records failed'),
    },
  )
  app.addHook('onClose', () => pruning.stop())
  return app
}
