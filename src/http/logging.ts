import type { FastifyServerOptions } from 'fastify'

/** Pino options both listeners build their logger from (the consent app may share the main one). */
export interface LogOptions {
  level: string
  /** Where lines go (tests read the log this way); default stdout. */
  stream?: { write(line: string): void }
}

/** Never log secrets: credentials travel in Authorization, search options in query strings. */
export const LOG_SERIALIZERS = {
  req: (req: { method: string; url: string; id: string }) => ({
    method: req.method,
    path: req.url.split('?')[0],
    id: req.id,
  }),
}

/**
 * Names of headers and query parameters that can carry a secret: credentials (Authorization,
 * Proxy-Authorization, X-Api-Key, any token), sessions (Cookie, Set-Cookie), signatures (the
 * consent `signature` parameter, X-Shopify-Hmac-Sha256 and every other X-Shopify-* header).
 * Deliberately broad: redacting a harmless header costs nothing, logging a credential is a breach.
 */
const SECRET_NAME =
  /auth|cookie|token|secret|signature|hmac|password|passwd|session|credential|key|^x-shopify-/i

export const REDACTED = '[Redacted]'

/** Objects whose entries are headers or query parameters, judged by name. */
const CONTAINERS = new Set(['headers', 'query'])
/** Header name, value, name, value…: the names cannot be told apart from the values. */
const RAW_HEADERS = 'rawHeaders'
/** How deep a log object is searched for those containers (busboy's are one level down). */
const MAX_DEPTH = 6

/**
 * Third-party code logs whole header objects under names we do not choose: `@fastify/multipart`
 * logs `{busboyOptions: {headers}}` at trace level. So every log object is searched (to
 * MAX_DEPTH, plain objects and arrays only) for `headers` and `query` objects, whose secret
 * entries (by name) are replaced, and `rawHeaders`, dropped whole. Copy on write: the caller's
 * objects are never changed, and a line of primitives (the request line) is returned as is.
 * Pino's `redact` could not do this cheaply: one leading-wildcard path cost ~3 µs per line.
 */
export function redactLogObject(obj: Record<string, unknown>): Record<string, unknown> {
  return redactEntries(obj, 0) as Record<string, unknown>
}

function redactEntries(node: object, depth: number): object {
  let copy: Record<string, unknown> | unknown[] | undefined
  for (const [key, value] of Object.entries(node)) {
    let next = value
    if (key === RAW_HEADERS && value !== undefined) next = REDACTED
    else if (typeof value !== 'object' || value === null || !isPlainContainer(value)) continue
    else if (CONTAINERS.has(key)) next = censorEntries(value)
    else if (depth < MAX_DEPTH) next = redactEntries(value, depth + 1)
    if (next === value) continue
    copy ??= Array.isArray(node) ? [...node] : { ...node }
    ;(copy as Record<string, unknown>)[key] = next
  }
  return copy ?? node
}

function censorEntries(container: object): object {
  let copy: Record<string, unknown> | undefined
  for (const key of Object.keys(container)) {
    if (!SECRET_NAME.test(key)) continue
    copy ??= { ...container }
    copy[key] = REDACTED
  }
  return copy ?? container
}

/** Plain objects, null-prototype dictionaries (Node's headers, the query parser's) and arrays. */
function isPlainContainer(value: object): boolean {
  if (Array.isArray(value)) return true
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null || Object.getPrototypeOf(proto) === null
}

/**
 * The logger of a listener: a level (and a stream), always with our serializers and redaction.
 * `true` (Fastify's "default logger") gets them too; `false` logs nothing.
 */
export function loggerOptions(
  logger: boolean | LogOptions | undefined,
): FastifyServerOptions['logger'] {
  if (logger === undefined || logger === false) return false
  const base = logger === true ? { level: 'info' } : logger
  return { ...base, serializers: LOG_SERIALIZERS, formatters: { log: redactLogObject } }
}
