import type { RouteOptions } from 'fastify'
import { describe, expect, it } from 'vitest'
import type { OperationId } from '../../access/operations.js'
import type { OpenApiDocument } from './document.js'
import { catalogOperation, operationIds } from './operation-ids.js'

/** What the route step puts into a route's schema copy (swagger copies its `x-` keys over). */
function carried(operation: OperationId, url: string): Record<string, unknown> {
  const schema: Record<string, unknown> = {}
  catalogOperation({ schema, url, route: { config: { operation } } as RouteOptions })
  return schema
}

describe('operation ids from the catalog', () => {
  it('names each operation by its route’s catalog entry, and leaves no trace of the id', () => {
    const doc: OpenApiDocument = {
      openapi: '3.1.0',
      paths: {
        '/v1/auth/login': {
          post: { summary: 'Log in', ...carried('auth.login', '/v1/auth/login'), responses: {} },
        },
        '/v1/vaults': { get: { ...carried('vault.list', '/v1/vaults'), responses: {} } },
      },
    }
    operationIds(doc)
    expect(doc.paths['/v1/auth/login']?.post).toEqual({
      summary: 'Log in',
      responses: {},
      operationId: 'login',
    })
    expect(doc.paths['/v1/vaults']?.get).toEqual({ responses: {}, operationId: 'listVaults' })
  })

  it('gives no name to an operation whose catalog entry has none', () => {
    const doc: OpenApiDocument = {
      openapi: '3.1.0',
      paths: { '/healthz': { get: carried('health.live', '/healthz') } },
    }
    operationIds(doc)
    expect(doc.paths['/healthz']?.get).toEqual({})
  })
})
