import type { FastifySchema, RouteOptions } from 'fastify'
import { documentedInput } from './documented-input.js'
import { formMediaTypes } from './form-media-types.js'
import type { RouteDoc, RouteTransform } from './route-transform.js'

/** How each route is documented, changed in this order (each file says what and why). */
const routeTransforms: RouteTransform[] = [documentedInput, formMediaTypes]

/** fastify-swagger options that apply the transforms above (spread into its options). */
export const openapiTransforms = {
  transform: ({
    schema,
    url,
    route,
  }: {
    schema: FastifySchema
    url: string
    route: RouteOptions
  }) => {
    const start: RouteDoc = { schema: schema as RouteDoc['schema'], url, route }
    const done = routeTransforms.reduce((current, step) => step(current), start)
    return { schema: done.schema, url: done.url }
  },
}
