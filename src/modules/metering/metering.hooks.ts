import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Metering } from '../../access/metering.js'
import { operationsFor } from '../../access/metering.js'
import { isOperationId, OPERATIONS } from '../../access/operations.js'
import { operationsConsumed, recordOperations } from '../../access/operations-consumed.js'
import { returnedOf } from '../../access/returned.js'
import type { MeteringService } from './metering.service.js'

function meteringOf(request: FastifyRequest): Metering | undefined {
  const operation = request.routeOptions.config.operation
  return isOperationId(operation) ? OPERATIONS[operation].metering : undefined
}

/**
 * Meters every route whose catalog entry says how it counts (access/operations.ts):
 * - preHandler (after the access rule): the account's daily quota, checked against the stored
 *   count before any work (429 OPERATIONS_QUOTA_EXCEEDED);
 * - onSend, once the handler produced a success and before a byte is sent: the count by the
 *   operation's rule from what the handler reported (access/returned.ts), taken (stored within
 *   COUNT_FLUSH_MS, metering.service.ts) and recorded on the request for the audit trail, whose
 *   event stores it durably with the request. An error response counts nothing.
 * Other routes pay one property read per hook (callback hooks: no promise on the hot path).
 */
export function addMetering(app: FastifyInstance, metering: MeteringService): void {
  app.addHook('preHandler', (request, _reply, done) => {
    if (!meteringOf(request) || !request.actor) {
      done()
      return
    }
    const checking = metering.checkQuota(request.actor.principal.accountId)
    if (checking === undefined) done()
    else checking.then(() => done(), done)
  })
  app.addHook('onSend', (request, reply, payload, done) => {
    const spec = meteringOf(request)
    if (!spec || reply.statusCode >= 400 || !request.actor) {
      done(null, payload)
      return
    }
    const returned = returnedOf(request)
    if (!returned) {
      done(new Error(`metered operation ${request.routeOptions.config.operation} reported nothing`))
      return
    }
    recordOperations(request, {
      category: spec.category,
      count: operationsFor(spec.rule, returned),
    })
    done(null, payload)
  })
  // The counts this node has taken are stored before the store closes (it closes after the app).
  app.addHook('onClose', async () => metering.flush())
}

/**
 * Takes the count `addMetering` recorded, once the answer is final: registered after the audit
 * trail's append (http/audit.ts), so a request whose event could not be stored (answered 503)
 * counts nothing, like any other failed request.
 */
export function addMeteringCount(app: FastifyInstance, metering: MeteringService): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    const spec = meteringOf(request)
    const consumed = operationsConsumed(request)
    if (spec && consumed && reply.statusCode < 400 && request.actor) {
      metering.count(request.actor.principal.accountId, spec.category, consumed.count)
    }
    done(null, payload)
  })
}
