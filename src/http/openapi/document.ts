import { readFileSync } from 'node:fs'
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify'

/**
 * The parts of an OpenAPI 3.1 document the transforms read and write; everything else passes
 * through untouched (the index signatures).
 */
export interface Parameter {
  name: string
  in: string
  description?: string
  [key: string]: unknown
}
export interface Operation {
  operationId?: string
  tags?: string[]
  parameters?: Parameter[]
  security?: Record<string, string[]>[]
  [key: string]: unknown
}
export type PathItem = Record<string, Operation>
export type SecurityScheme =
  | { type: 'http'; scheme: 'basic'; description: string }
  | { type: 'apiKey'; in: 'query' | 'header'; name: string; description: string }
export interface TagObject {
  name: string
  description?: string
}
export interface OpenApiDocument {
  openapi: string
  paths: Record<string, PathItem>
  tags?: TagObject[]
  components?: { schemas?: Record<string, unknown>; [key: string]: unknown }
  [key: string]: unknown
}

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']

/** Every `[path, method, operation]` of a document, in document order. */
export function operationsOf(doc: OpenApiDocument): [string, string, Operation][] {
  const found: [string, string, Operation][] = []
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item[method]
      if (operation) found.push([path, method, operation])
    }
  }
  return found
}

/**
 * One step on a route's schema before @fastify/swagger turns it into an operation. It gets a
 * shallow copy of the schema (the route's own is what Fastify validates with): set or replace
 * its top-level keys; never change a nested object in place (`response`, `body` are the
 * route's own).
 */
export type RouteTransform = (input: {
  schema: FastifySchema
  url: string
  route: RouteOptions
}) => void

/** One step on the finished document (names, paths, tags), changing it in place. */
export type DocumentTransform = (doc: OpenApiDocument) => void

export interface DocumentSpec {
  title: string
  description: string
  securitySchemes: Record<string, SecurityScheme>
  /** Applied in order to every route's schema copy. */
  routeTransforms: readonly RouteTransform[]
  /** Applied in order to the generated document. */
  documentTransforms: readonly DocumentTransform[]
}

interface PackageInfo {
  version: string
  license: string
}

/** Read once: the document's version and licence are the package's (same depth in src and dist). */
const PACKAGE: PackageInfo = JSON.parse(
  readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'),
) as PackageInfo

/**
 * A shared schema's component name: its `$id` (`ErrorEnvelope`), made a legal component key;
 * the library's default is `def-<n>`, which generated clients turn into `Def0`.
 */
export function componentName(json: Record<string, unknown>, index: number): string {
  const named = typeof json.$id === 'string' ? json.$id : json.title
  const key = typeof named === 'string' ? named.replace(/[^A-Za-z0-9._-]/g, '_') : ''
  return key === '' ? `Schema${index}` : key
}

/** @fastify/swagger options for one listener's document. */
export function swaggerOptions(spec: DocumentSpec): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: spec.title,
        version: PACKAGE.version,
        description: spec.description,
        license: { name: PACKAGE.license, identifier: PACKAGE.license },
      },
      // Relative: the document is right wherever the server is reached (behind a proxy too).
      servers: [{ url: '/' }],
      components: { securitySchemes: spec.securitySchemes },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, index) => {
        if (!json.title && typeof json.$id === 'string') json.title = json.$id
        return componentName(json, index)
      },
    },
    transform: ({ schema, url, route }) => {
      const copy: FastifySchema = { ...schema }
      for (const step of spec.routeTransforms) step({ schema: copy, url, route })
      return { schema: copy, url }
    },
    transformObject: (documentObject) => {
      const doc = ('openapiObject' in documentObject
        ? documentObject.openapiObject
        : documentObject.swaggerObject) as unknown as OpenApiDocument
      for (const step of spec.documentTransforms) step(doc)
      return doc as never
    },
  }
}

/** `GET /openapi.json`: public, outside the success envelope, not itself in the document. */
export function serveDocument(app: FastifyInstance): void {
  app.get(
    '/openapi.json',
    {
      schema: { hide: true },
      config: { operation: 'openapi.read', access: { public: true }, envelope: false },
    },
    async () => app.swagger(),
  )
}
