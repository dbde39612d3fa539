import type { FastifyInstance, FastifyReply } from 'fastify'

/**
 * What both listeners (the main API and the consent API) do for every request. Callback hooks:
 * an async hook costs a promise per request on the hot path.
 */

/**
 * JSON answers carry exactly this type, as TrueVault's did: JSON is UTF-8 by definition
 * (RFC 8259 §8.1), and some clients (a PHP one) decode a body only when the type is exactly
 * `application/json`.
 */
export const JSON_TYPE = 'application/json'

/** What Fastify puts on every JSON answer it serializes, whatever type the route set. */
const FASTIFY_JSON_TYPE = 'application/json; charset=utf-8'

/**
 * Answers are never cached (they carry personal data) and never content-sniffed; JSON answers
 * say `application/json` with no charset parameter.
 */
export function addResponseHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', (_request, reply, done) => {
    reply.header('cache-control', 'no-store')
    reply.header('x-content-type-options', 'nosniff')
    done()
  })
  // Fastify appends `; charset=utf-8` to any JSON type while sending, so the type can only be
  // set right after that, here. Only for a body Fastify serialized (a string): a streamed BLOB
  // keeps the type it was uploaded with, `application/json; charset=utf-8` included.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (typeof payload === 'string' && reply.getHeader('content-type') === FASTIFY_JSON_TYPE)
      reply.header('content-type', JSON_TYPE)
    done(null, payload)
  })
}

/**
 * Sends `body` as JSON typed exactly `application/json`, also where no onSend hook runs (the
 * router's own errors: a malformed URL, an over-long path parameter). With a serializer of its
 * own the reply keeps the type it was given: Fastify appends its charset only to replies it
 * serializes itself.
 */
export function sendJson(reply: FastifyReply, body: unknown): FastifyReply {
  return reply.serializer(JSON.stringify).type(JSON_TYPE).send(body)
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
