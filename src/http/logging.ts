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

/**
 * Third-party code logs whole header objects under names we do not choose: `@fastify/multipart`
 * logs `{busboyOptions: {headers}}` at trace level, an error may carry `config.headers` or
 * `response.headers`. So every `headers`/`query` object up to three levels down is covered, and
 * the censor decides by the entry's name. `rawHeaders` (name, value, name, value…) cannot be told
 * apart by name: it is dropped whole.
 */
const CONTAINERS = ['headers', 'query', 'rawHeaders']
const PREFIXES = ['', '*.', '*.*.', '*.*.*.']
const REDACT_PATHS = PREFIXES.flatMap((prefix) =>
  CONTAINERS.map((c) => (c === 'rawHeaders' ? `${prefix}${c}` : `${prefix}${c}.*`)),
)

/** Replaces a secret-bearing entry (by its name, the last step of its path) with a marker. */
export function censorSecret(value: unknown, path: string[]): unknown {
  const name = String(path[path.length - 1] ?? '')
  return name === 'rawHeaders' || SECRET_NAME.test(name) ? REDACTED : value
}

export const LOG_REDACTION = { paths: REDACT_PATHS, censor: censorSecret }

/**
 * The logger of a listener: a level (and a stream), always with our serializers and redaction.
 * `true` (Fastify's "default logger") gets them too; `false` logs nothing.
 */
export function loggerOptions(
  logger: boolean | LogOptions | undefined,
): FastifyServerOptions['logger'] {
  if (logger === undefined || logger === false) return false
  const base = logger === true ? { level: 'info' } : logger
  return { ...base, serializers: LOG_SERIALIZERS, redact: LOG_REDACTION }
}
