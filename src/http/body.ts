import type { Readable } from 'node:stream'
import formbody from '@fastify/formbody'
import multipart from '@fastify/multipart'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AppError, ErrorType, errors } from '../lib/errors.js'
import { jsonTooDeep, MAX_JSON_DEPTH } from '../lib/input.js'

type Fields = Record<string, unknown>

/**
 * Accepts bodies the way real clients send them (docs/truevault-clients.md §1): JSON (an empty body
 * with a JSON content type is no body at all — the SDK sends that on GET and DELETE), urlencoded,
 * multipart (the official SDK sends every v1 body as multipart), and on form routes parameters in
 * the query string, with field names trimmed (the SDK's `"not_valid_after "` has a trailing space).
 */
export async function registerBodyParsers(app: FastifyInstance): Promise<void> {
  const json = app.getDefaultJsonParser('remove', 'remove')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (typeof body === 'string' && body.trim() === '') {
      done(null, undefined)
      return
    }
    void json(request, body as string, (err, parsed) => {
      if (err)
        done(
          new AppError(
            400,
            ErrorType.invalidRequest,
            'INVALID_JSON',
            'Request body must be valid JSON',
          ),
          undefined,
        )
      else if (jsonTooDeep(parsed))
        done(
          new AppError(
            400,
            ErrorType.invalidRequest,
            'INVALID_JSON',
            `Request body must not nest deeper than ${MAX_JSON_DEPTH} levels`,
          ),
          undefined,
        )
      else done(null, parsed)
    })
  })
  await app.register(formbody)
  await app.register(multipart, {
    limits: { fieldSize: app.initialConfig.bodyLimit ?? 1_048_576, fields: 100, parts: 200 },
  })
  app.addHook('preValidation', async (request) => {
    if (!request.routeOptions.config.form) return
    const json = request.headers['content-type']?.includes('json') === true
    let body = plainObject(request.body)
    if (request.isMultipart()) body = await readMultipartFields(request)
    request.body = mergeForm(plainObject(request.query), body, !json)
  })
}

function plainObject(value: unknown): Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Fields)
    : {}
}

/**
 * Query parameters first, body fields win; names trimmed. In a form (not JSON) a repeated field
 * keeps its last value.
 */
function mergeForm(query: Fields, body: Fields, collapse: boolean): Fields {
  const out: Fields = Object.create(null)
  for (const source of [query, body]) {
    for (const [key, value] of Object.entries(source)) {
      const name = key.trim()
      if (name === '' || name === '__proto__') continue
      out[name] = collapse && Array.isArray(value) ? value[value.length - 1] : value
    }
  }
  return out
}

async function readMultipartFields(request: FastifyRequest): Promise<Fields> {
  const fields: Fields = Object.create(null)
  // Fastify's bodyLimit never sees a multipart body (the plugin reads it): without this count,
  // 100 fields of up to bodyLimit each were buffered — a form body 100 times the limit.
  const limit =
    request.routeOptions.bodyLimit ?? request.server.initialConfig.bodyLimit ?? 1_048_576
  let size = 0
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        part.file.resume()
        throw errors.invalidField(part.fieldname, 'must be a form field, not a file')
      }
      const value = typeof part.value === 'string' ? part.value : String(part.value)
      size += Buffer.byteLength(part.fieldname) + Buffer.byteLength(value)
      if (size > limit)
        throw new AppError(
          413,
          ErrorType.invalidRequest,
          'PAYLOAD_TOO_LARGE',
          'Request body is too large',
        )
      fields[part.fieldname] = value
    }
  } catch (e) {
    // The parser's own errors (no boundary, truncated or malformed parts) carry no status: they
    // are the client's fault, not a server failure. Limit errors keep their 4xx status.
    const status = (e as { statusCode?: unknown }).statusCode
    if (e instanceof AppError || (typeof status === 'number' && status < 500)) throw e
    throw new AppError(
      400,
      ErrorType.invalidRequest,
      'INVALID_MULTIPART',
      'Request body must be a valid multipart form',
      { cause: e },
    )
  }
  return fields
}

/** The request bodies of raw BLOB uploads, handed over unread by the catch-all parser below. */
const rawBodies = new WeakMap<FastifyRequest, Readable>()

/**
 * For an encapsulated scope holding only the BLOB upload routes: every body that is not
 * multipart or urlencoded is the file itself (older TrueVault clients send it raw with its own
 * type, JSON and text included: docs/truevault-clients.md §1). The parser reads nothing: the route
 * streams the body after its credential and access checks, so Fastify's 1 MiB `bodyLimit`
 * (which applies only to bodies Fastify reads) does not apply here; the BLOB limit does.
 */
export function acceptRawUploads(scope: FastifyInstance): void {
  scope.removeContentTypeParser(['application/json', 'text/plain'])
  scope.addContentTypeParser('*', (request, payload, done) => {
    rawBodies.set(request, payload)
    done(null, undefined)
  })
}

/** The unread body of a raw upload; undefined for multipart, urlencoded or no body at all. */
export function rawUploadBody(request: FastifyRequest): Readable | undefined {
  return rawBodies.get(request)
}
