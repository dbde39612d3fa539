import type { RouteTransform } from './document.js'

/** A request body per media type, as OpenAPI's `requestBody.content` has it. */
export type DocumentedBody = Record<string, { schema: unknown }>

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Input the route reads itself, past Fastify's validation (a streamed BLOB upload, a body
     * whose shape depends on its media type): documented here, checked by the route.
     */
    openapi?: {
      /** Replaces the documented request body (the route's `schema.body`, if any, still runs). */
      body?: DocumentedBody
      /** Query parameters read by hand, documented as if the route declared them. */
      querystring?: unknown
    }
  }
}

/** Puts `config.openapi` into the documented schema copy, where fastify-swagger reads it. */
export const documentedInput: RouteTransform = ({ schema, route }) => {
  const extra = route.config?.openapi
  if (!extra) return
  if (extra.body) schema.body = { content: extra.body }
  if (extra.querystring) schema.querystring = extra.querystring
}
