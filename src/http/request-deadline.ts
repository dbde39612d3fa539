import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Deadline, runWithDeadline } from '../store/request-deadline.js'

/** How long a request's database work may take (COFFER_REQUEST_TIMEOUT_MS and the BLOB one). */
export const DEFAULT_REQUEST_DEADLINES: RequestDeadlines = Object.freeze({
  requestTimeoutMs: 30_000,
  blobUploadTimeoutMs: 600_000,
})

export interface RequestDeadlines {
  /** Every route, counted from the request's arrival. */
  requestTimeoutMs: number
  /** Routes that receive a file (`blobUpload`): the body may take long to arrive on a slow link. */
  blobUploadTimeoutMs: number
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route receives a BLOB's bytes in its body: it gets the longer BLOB deadline. */
    blobUpload?: boolean
  }
  interface FastifyRequest {
    deadline?: Deadline
  }
}

/**
 * Runs every request under a deadline (store/request-deadline.ts): once it passes, the request's
 * running statement is cancelled, no further one is sent and its transaction rolls back; it is
 * answered 503 REQUEST_TIMEOUT. The deadline bounds the database work of the request: a
 * download streams its bytes after its last statement, so only uploads need a longer one.
 * Callback hooks; `run` wraps `done` so the following hooks and the handler inherit it (the
 * body arrives in the socket's context, hence entering again before the handler).
 */
export function addRequestDeadline(
  app: FastifyInstance,
  deadlines: RequestDeadlines,
  dialect: 'sqlite' | 'postgres',
): void {
  // SQLite runs each statement synchronously in this process: nothing can be cancelled, and
  // its only wait (another process's write lock) is bounded by COFFER_SQLITE_BUSY_TIMEOUT_MS
  // and answered 503. The request context the deadline needs (AsyncLocalStorage, promise hooks
  // on Node 20) halved the throughput of light requests (/v1/auth/me 0.23x -> 0.12x of bare
  // Fastify): on SQLite it is not worth that. PostgreSQL waits on the network: it keeps it.
  if (dialect === 'sqlite') return
  const timeoutFor = (request: FastifyRequest) =>
    request.routeOptions.config.blobUpload
      ? deadlines.blobUploadTimeoutMs
      : deadlines.requestTimeoutMs
  app.decorateRequest('deadline', undefined)
  app.addHook('onRequest', (request, _reply, done) => {
    const deadline = new Deadline(timeoutFor(request))
    request.deadline = deadline
    runWithDeadline(deadline, done)
  })
  app.addHook('preHandler', (request, _reply, done) => {
    if (request.deadline) runWithDeadline(request.deadline, done)
    else done()
  })
  app.addHook('onResponse', (request, _reply, done) => {
    request.deadline?.clear()
    done()
  })
  app.addHook('onRequestAbort', (request, done) => {
    request.deadline?.clear()
    done()
  })
}
