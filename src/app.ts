import { randomUUID } from 'node:crypto'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import Fastify, { type FastifyInstance, LogController } from 'fastify'
import type { TrustProxy } from './config.js'
import type { BackupScheduleConfig } from './config-backup.js'
import { DEFAULT_HSTS_MAX_AGE_SECONDS } from './config-tls.js'
import type { Deps } from './deps.js'
import { addAuditAppend, markAuditHandlerPhase, registerAuditContext } from './http/audit.js'
import { auditedFrameworkErrors } from './http/audit-router-refusals.js'
import { registerAuthHooks } from './http/auth-hooks.js'
import { registerBodyParsers } from './http/body.js'
import { addRequestLog, addResponseHeaders } from './http/common-hooks.js'
import { API_CORS, addCors } from './http/cors.js'
import { frameworkErrorHandler, registerErrorHandling } from './http/errors.js'
import { addFreeSpaceGuard } from './http/free-space-guard.js'
import { addHsts } from './http/hsts.js'
import { addInputGuard } from './http/input-guard.js'
import { type LogOptions, loggerOptions } from './http/logging.js'
import { type AppMetrics, addRequestMetrics, metricsRoute } from './http/metrics.js'
import { MAIN_DOCUMENT, serveDocument, swaggerOptions } from './http/openapi/index.js'
import {
  addRequestDeadline,
  DEFAULT_REQUEST_DEADLINES,
  type RequestDeadlines,
} from './http/request-deadline.js'
import { ErrorEnvelope } from './http/schemas.js'
import { addShutdownGate } from './http/shutdown.js'
import type { TlsMaterial } from './http/tls-material.js'
import { fastifyTlsOptions, prepareTlsServer } from './http/tls-server.js'
import { fastifyTrustProxy } from './http/trust-proxy.js'
import { auditRoutes } from './modules/audit/audit.routes.js'
import { authRoutes } from './modules/auth/auth.routes.js'
import { backupStatusRoutes } from './modules/backup/backup-status.routes.js'
import { blobRoutes } from './modules/blobs/blobs.routes.js'
import { type ConsoleAssets, defaultConsoleAssets } from './modules/console/console.assets.js'
import { consoleRoutes } from './modules/console/console.routes.js'
import { documentRoutes } from './modules/documents/documents.routes.js'
import { groupRoutes } from './modules/groups/groups.routes.js'
import { healthRoutes } from './modules/health/health.routes.js'
import { messagingRoutes } from './modules/messaging/messaging.routes.js'
import { addMetering, addMeteringCount } from './modules/metering/metering.hooks.js'
import { meteringRoutes } from './modules/metering/metering.routes.js'
import { mfaRoutes } from './modules/mfa/mfa.routes.js'
import { passwordResetRoutes } from './modules/password-reset/flows.routes.js'
import { policySimulatorRoutes } from './modules/policy-simulator/simulator.routes.js'
import { satRoutes } from './modules/sats/sats.routes.js'
import { schemaRoutes } from './modules/schemas/schemas.routes.js'
import { searchRoutes } from './modules/search/search.routes.js'
import { settingsRoutes } from './modules/settings/settings.routes.js'
import { userRoutes } from './modules/users/users.routes.js'
import { vaultRoutes } from './modules/vaults/vaults.routes.js'

export interface AppOptions {
  /** Default: no logging. Whatever is given, our serializers and secret redaction apply. */
  logger?: boolean | LogOptions
  /** Which proxies' X-Forwarded-For to believe (config.ts TrustProxy); default none. */
  trustProxy?: TrustProxy
  bodyLimit?: number
  /** Browser origins allowed to call the API (COFFER_CORS_ORIGINS); default none: no CORS. */
  cors?: { origins: readonly string[]; maxAgeSeconds: number }
  /** Deadlines of each request's database work (default 30 s; 10 min for BLOB uploads). */
  deadlines?: RequestDeadlines
  /** Request metrics and `GET /metrics` (http/metrics.ts); default none. */
  metrics?: AppMetrics
  /** Native TLS (HTTPS and HTTP/2 by ALPN, http/tls-server.ts); default plain HTTP. */
  tls?: TlsMaterial
  /** HSTS max-age on answers over TLS (COFFER_HSTS_MAX_AGE_SECONDS); default one year. */
  hstsMaxAgeSeconds?: number
  /** The browser console's build (default: dist/console, read once; null: not built). */
  consoleAssets?: ConsoleAssets | null
  /** COFFER_BACKUP_* (GET /v1/backups/status shows them); default: no schedule. */
  backupSchedule?: BackupScheduleConfig
}

/** The main API: builds the Fastify app from ready dependencies (tests call this directly). */
export async function buildApp(deps: Deps, options: AppOptions = {}): Promise<FastifyInstance> {
  const logger = loggerOptions(options.logger)
  const app = Fastify({
    logger,
    // One line per request from our onResponse hook instead (route pattern, never the query).
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    trustProxy: fastifyTrustProxy(options.trustProxy),
    bodyLimit: options.bodyLimit ?? 1_048_576,
    // A path may list up to 100 UUIDs (GET /v2/users/{ids}: 3,699 characters); find-my-way's
    // default of 100 would answer 414 from the third id on. Longer lists still get a 4xx.
    routerOptions: { maxParamLength: 8192 },
    frameworkErrors: deps.audit ? auditedFrameworkErrors(deps.audit) : frameworkErrorHandler,
    // Requests that reach a closing app get our envelope 503 (http/shutdown.ts), not Fastify's.
    return503OnClosing: false,
    ajv: { customOptions: { coerceTypes: 'array', removeAdditional: false } },
    // Typed as an HTTP/1 app whatever the server: routes and hooks see the same request API.
    ...(options.tls ? (fastifyTlsOptions(options.tls) as object) : {}),
  }) as FastifyInstance
  if (options.tls) prepareTlsServer(app)

  app.addSchema(ErrorEnvelope)
  registerErrorHandling(app)
  // First of the onRequest hooks: a request refused at shutdown does no work.
  addShutdownGate(app, deps.health)
  // First: every later hook (authentication, the access rule) runs under the deadline.
  addRequestDeadline(app, options.deadlines ?? DEFAULT_REQUEST_DEADLINES, deps.store.dialect)
  if (options.metrics) addRequestMetrics(app, options.metrics.metrics, 'api')
  await registerBodyParsers(app)
  // Before the access rule's preHandler (registered with the auth hooks): it reads the input.
  addInputGuard(app)
  // Security headers first, then CORS: a preflight is answered in CORS's onRequest hook, with
  // those headers and before authentication (a preflight carries no credential).
  addResponseHeaders(app)
  addHsts(app, {
    maxAgeSeconds: options.hstsMaxAgeSeconds ?? DEFAULT_HSTS_MAX_AGE_SECONDS,
    tls: options.tls !== undefined,
  })
  await addCors(app, {
    origins: options.cors?.origins ?? [],
    maxAgeSeconds: options.cors?.maxAgeSeconds ?? 0,
    ...API_CORS,
  })
  // Before authentication, whose refusals are audited too (http/audit.ts).
  if (deps.audit) registerAuditContext(app, deps.audit, deps.meter)
  registerAuthHooks(app, deps)
  // After the access rule: only an allowed caller meets the quota, and only its success counts.
  addMetering(app, deps.metering)
  // After the access rule's preHandler: only a caller allowed to write learns the disk is full.
  addFreeSpaceGuard(app, deps.freeSpace)
  // Last of the guards: from here the request's first write carries its audit event.
  if (deps.audit) markAuditHandlerPhase(app)
  // onSend, in this order: the metering records what the request consumed (above), the audit
  // trail stores the event carrying it (or turns the answer into a 503), then the count is taken
  // only for an answer that stayed a success.
  if (deps.audit) addAuditAppend(app, deps.audit)
  addMeteringCount(app, deps.metering)

  // Every JSON success body carries `result` and `transaction_id` (spec, Common rules). The
  // small hooks below use callbacks: an async hook costs a promise per request on the hot path.
  app.addHook('preSerialization', (request, _reply, payload, done) => {
    if (
      request.routeOptions.config.envelope !== false &&
      payload &&
      typeof payload === 'object' &&
      !Array.isArray(payload) &&
      !('result' in payload)
    ) {
      done(null, { result: 'success', transaction_id: request.id, ...payload })
      return
    }
    done(null, payload)
  })
  if (logger !== false) addRequestLog(app, 'request')

  await app.register(swagger, swaggerOptions(MAIN_DOCUMENT))
  await app.register(swaggerUi, { routePrefix: '/docs' })
  serveDocument(app)

  await authRoutes(app, deps)
  await userRoutes(app, deps.users, deps.groups)
  await groupRoutes(app, deps.groups)
  await vaultRoutes(app, deps.vaults)
  await documentRoutes(app, deps.documents)
  await blobRoutes(app, deps.blobService)
  await schemaRoutes(app, deps.schemas, deps.userSchemas)
  await searchRoutes(app, deps.search)
  await satRoutes(app, deps.sats)
  await messagingRoutes(app, deps.messaging)
  await passwordResetRoutes(app, deps.passwordResets)
  // Reset emails are sent after their request is answered: let them finish before closing.
  app.addHook('onClose', async () => deps.passwordResets.idle())
  await mfaRoutes(app, deps.mfa)
  await settingsRoutes(app, deps.settings)
  await meteringRoutes(app, deps.metering)
  await auditRoutes(app, deps.auditEvents)
  await policySimulatorRoutes(app, deps.policySimulator)
  await backupStatusRoutes(app, deps.store.db, deps.clock, options.backupSchedule)
  await healthRoutes(app, deps.health)
  await consoleRoutes(
    app,
    options.consoleAssets !== undefined ? options.consoleAssets : defaultConsoleAssets(),
  )
  if (options.metrics?.serve) metricsRoute(app, options.metrics.metrics, options.metrics.token)
  return app
}
