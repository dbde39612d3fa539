import { createHash, randomUUID, timingSafeEqual } from 'node:crypto'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import { errors } from '../lib/errors.js'
import type { Listener, Metrics } from '../metrics/prometheus.js'
import { frameworkErrorHandler, registerErrorHandling } from './errors.js'

/** How a listener's app serves metrics (COFFER_METRICS_*; see config.ts MetricsConfig). */
export interface AppMetrics {
  metrics: Metrics
  /** Serve `GET /metrics` on this app (false: only count its requests). */
  serve: boolean
  /** When set, `/metrics` asks `Authorization: Bearer <token>`. */
  token?: string | undefined
}

/**
 * Counts every request of this app by route *template* (`/v1/vaults/:vaultId`, never the URL:
 * ids and query strings stay out of the labels) and status. A request no route matched is
 * `unmatched`. In flight from the first byte until the response closes, answered or aborted.
 */
export function addRequestMetrics(app: FastifyInstance, metrics: Metrics, listener: Listener) {
  app.addHook('onRequest', (_request, reply, done) => {
    metrics.inFlight.inc({ listener })
    reply.raw.once('close', () => metrics.inFlight.dec({ listener }))
    done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    const labels = {
      listener,
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: String(reply.statusCode),
    }
    metrics.requests.inc(labels)
    metrics.requestSeconds.observe(labels, reply.elapsedTime / 1000)
    done()
  })
}

const digest = (text: string) => createHash('sha256').update(text).digest()

/** Bearer token check in constant time (both sides hashed to the same length first). */
function bearerMatches(request: FastifyRequest, token: string): boolean {
  const header = request.headers.authorization
  const given = typeof header === 'string' && /^Bearer /i.test(header) ? header.slice(7) : ''
  return timingSafeEqual(digest(given), digest(token)) && given.length > 0
}

/** `GET /metrics` in Prometheus text format; a probe (never rate-limited), logged below info. */
export function metricsRoute(app: FastifyInstance, metrics: Metrics, token?: string): void {
  app.get(
    '/metrics',
    {
      config: { operation: 'metrics.read', access: { public: true }, probe: true, envelope: false },
      logLevel: 'warn',
      schema: { hide: true },
    },
    async (request, reply) => {
      if (token !== undefined && !bearerMatches(request, token)) {
        reply.header('www-authenticate', 'Bearer')
        throw errors.unauthenticated('A valid metrics bearer token is required')
      }
      const text = await metrics.text()
      return reply.type(metrics.contentType).send(text)
    },
  )
}

/** The metrics listener of COFFER_METRICS_PORT: `/metrics` only, errors in the main envelope. */
export async function buildMetricsApp(metrics: Metrics, token?: string): Promise<FastifyInstance> {
  const app = Fastify({ genReqId: () => randomUUID(), frameworkErrors: frameworkErrorHandler })
  registerErrorHandling(app)
  metricsRoute(app, metrics, token)
  return app
}
