import type { FastifyInstance } from 'fastify'
import { errors } from '../lib/errors.js'
import { findMalformed } from '../lib/input.js'

/**
 * Every text input well-formed Unicode, every number finite, on every route of the app it is
 * added to, so a new route cannot miss it (decisions.md). A preHandler: it runs after validation
 * has coerced query and form strings (`page=Infinity` and `1e400` become numbers only then) and
 * before the access rule and the handler; its 400 names the offending field. Content decoded
 * later (base64 JSON fields) is checked by its decoder (lib/input.ts).
 */
export function addInputGuard(app: FastifyInstance): void {
  app.addHook('preHandler', (request, _reply, done) => {
    const malformed =
      findMalformed(request.params, '') ??
      findMalformed(request.query, '') ??
      findMalformed(request.body, '')
    if (malformed) done(errors.invalidField(malformed.field, malformed.problem))
    else done()
  })
}
