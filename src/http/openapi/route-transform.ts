import type { FastifySchema, RouteOptions } from 'fastify'

/** What fastify-swagger hands its `transform` for each route, and takes back. */
export interface RouteDoc {
  schema: FastifySchema & Record<string, unknown>
  url: string
  route: RouteOptions
}

/**
 * One change of how a route is documented. It returns a new schema object: the route's own
 * schema is the one Fastify validates and serializes with, and must stay as it is.
 */
export type RouteTransform = (doc: RouteDoc) => RouteDoc
