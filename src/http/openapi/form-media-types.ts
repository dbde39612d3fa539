import type { RouteTransform } from './document.js'

/**
 * Form routes (`config.form`, http/body.ts) take their fields as JSON, urlencoded (`curl -d`)
 * or multipart (the official SDK): all three are documented, with the same fields. A route that
 * documents its body itself (`config.openapi.body`) or names its types (`consumes`) is left as is.
 */
export const FORM_MEDIA_TYPES = [
  'application/json',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
]

export const formMediaTypes: RouteTransform = ({ schema, route }) => {
  if (!route.config?.form || !schema.body || schema.consumes || route.config.openapi?.body) return
  schema.consumes = FORM_MEDIA_TYPES
}
