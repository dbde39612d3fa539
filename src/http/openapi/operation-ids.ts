import { isOperationId, OPERATIONS } from '../../access/operations.js'
import type { DocumentTransform, RouteTransform } from './document.js'
import { operationsOf } from './document.js'

/**
 * Carries a route's catalog id into its generated operation (@fastify/swagger copies `x-` keys of
 * the schema), where `operationIds` reads it and takes it out again.
 */
const CATALOG_ID = 'x-coffer-operation'

/** Route step: the operation id the route declares in `config.operation`. */
export const catalogOperation: RouteTransform = ({ schema, route }) => {
  const id = route.config?.operation
  if (id !== undefined) (schema as Record<string, unknown>)[CATALOG_ID] = id
}

/**
 * Document step: every operation's `operationId` (the name generated clients give its function)
 * is its catalog entry's `openapi` name (src/access/operations.ts), so a route is named once.
 */
export const operationIds: DocumentTransform = (doc) => {
  for (const [, , operation] of operationsOf(doc)) {
    const id = operation[CATALOG_ID]
    delete operation[CATALOG_ID]
    const name = isOperationId(id) ? OPERATIONS[id].openapi : undefined
    if (name !== undefined) operation.operationId = name
  }
}
