import type { FastifyRequest } from 'fastify'
import type { Returned } from './metering.js'

const RETURNED = Symbol('coffer.returned')

type Carrier = FastifyRequest & { [RETURNED]?: Returned }

/**
 * A metered route's handler reports what it returned (items, and whether in full), once it has
 * its result; the metering hook counts it by the operation's rule before the response is sent.
 * A metered route that reports nothing fails its request (so a route cannot forget it).
 */
export function reportReturned(request: FastifyRequest, returned: Returned): void {
  ;(request as Carrier)[RETURNED] = returned
}

export function returnedOf(request: FastifyRequest): Returned | undefined {
  return (request as Carrier)[RETURNED]
}
