import type { FastifyInstance } from 'fastify'
import { AppError, ErrorType } from '../../lib/errors.js'
import type { HealthService, ReadinessCheck } from './health.service.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A load balancer's probe (`/healthz`, `/readyz`, `/metrics`): answered while the node
     * drains, never counted by rate limits.
     */
    probe?: boolean
  }
}

/** A balancer retries a node that is not ready after this many seconds. */
const NOT_READY_RETRY_SECONDS = 1

/** 503 naming the failing checks (fixed names, never a database or storage error text). */
export function notReady(failing: ReadinessCheck[]): AppError {
  return new AppError(503, ErrorType.unavailable, 'NOT_READY', `Not ready: ${failing.join(', ')}`, {
    retryAfterSeconds: NOT_READY_RETRY_SECONDS,
  })
}

/**
 * `GET /healthz` (the process answers: no dependency is asked) and `GET /readyz` (this node
 * can serve: see HealthService). Public, logged below info (a balancer asks every few
 * seconds), and the same on both listeners: each app renders the 503 in its own error body.
 */
export async function healthRoutes(app: FastifyInstance, health: HealthService): Promise<void> {
  const options = { logLevel: 'warn', schema: { hide: true } } as const
  const probe = { access: { public: true }, probe: true } as const
  app.get('/healthz', { ...options, config: { ...probe, operation: 'health.live' } }, async () => ({
    status: 'ok',
  }))
  app.get('/readyz', { ...options, config: { ...probe, operation: 'health.ready' } }, async () => {
    const failing = await health.failingChecks()
    if (failing.length > 0) throw notReady(failing)
    // Ready (reads are served), and says why writes are answered 507.
    if (await health.writesRefused()) {
      return { status: 'ready', writes: 'refused', reason: 'free_space_below_floor' }
    }
    return { status: 'ready' }
  })
}
