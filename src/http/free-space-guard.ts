import type { FastifyInstance } from 'fastify'
import { errors } from '../lib/errors.js'
import type { FreeSpaceFloor } from '../storage/free-space-floor.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * False on a POST that stores no client data (a search, a login or logout): it is still
     * served while free space is under the floor, like a read.
     */
    storesData?: boolean
  }
}

/** Reads, and deletes: a delete is how space is given back (Elasticsearch's flood stage too). */
const ALLOWED = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE'])

/**
 * The one place the free-space floor refuses writes (507 STORAGE_FULL), after authentication
 * and the access rule (a stranger learns nothing about the disk) and before the body of an
 * upload is read or a transaction begins. Reads and deletes are always let through.
 */
export function addFreeSpaceGuard(app: FastifyInstance, floor: FreeSpaceFloor): void {
  if (!floor.enabled) return
  // A callback hook: reads, most requests, pass without a promise.
  app.addHook('preHandler', (request, _reply, done) => {
    // No route (404) stores nothing, and its caller was never authenticated.
    if (
      ALLOWED.has(request.method) ||
      request.is404 ||
      request.routeOptions.config.storesData === false
    ) {
      return done()
    }
    floor.refusing().then((refusing) => {
      if (!refusing) return done()
      floor.countRefusal()
      done(errors.storageFull())
    }, done)
  })
}
