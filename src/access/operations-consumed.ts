import type { FastifyRequest } from 'fastify'

/**
 * What one request consumed in billing operations (the spec's "Operations (billing units
 * consumed)" table): the metering feature records it once it knows the count, before the
 * response is sent; the audit trail reads it into the request's event. Kept on the request
 * itself, not in a module, so that neither feature imports the other.
 */
export interface OperationsConsumed {
  /** The billing category (the metering feature's names), e.g. `document_read`. */
  readonly category: string
  /** Operations counted for this request (0 when the route is metered but nothing counted). */
  readonly count: number
}

const CONSUMED = Symbol('coffer.operationsConsumed')

type Carrier = FastifyRequest & { [CONSUMED]?: OperationsConsumed }

/** Records what the request consumed; a later call replaces an earlier one. */
export function recordOperations(request: FastifyRequest, consumed: OperationsConsumed): void {
  ;(request as Carrier)[CONSUMED] = consumed
}

/** What the request consumed so far; undefined when nothing was recorded (a route not metered). */
export function operationsConsumed(request: FastifyRequest): OperationsConsumed | undefined {
  return (request as Carrier)[CONSUMED]
}
