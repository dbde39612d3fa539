import type { FastifyInstance } from 'fastify'

/**
 * What both listeners (the main API and the consent API) do for every request. Callback hooks:
 * an async hook costs a promise per request on the hot path.
 */

/** Answers are never cached (they carry personal data) and never content-sniffed. */
export function addResponseHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', (_request, reply, done) => {
    reply.header('cache-control', 'no-store')
    reply.header('x-content-type-options', 'nosniff')
    done()
  })
}

/** One log line per request: the route pattern, never the URL (query strings hold secrets). */
export function addRequestLog(app: FastifyInstance, message: string): void {
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
      },
      message,
    )
    done()
  })
}
