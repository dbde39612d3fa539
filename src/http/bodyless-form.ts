import { parse } from 'node:querystring'
import type { FastifyRequest } from 'fastify'
import { AppError, ErrorType } from '../lib/errors.js'

const FORM_TYPE = 'application/x-www-form-urlencoded'

/** A request announcing a body: a non-zero length or a chunked one (RFC 9112 §6.3). */
export function hasBody(req: { headers: Record<string, string | string[] | undefined> }): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

export function isUrlencoded(req: {
  headers: Record<string, string | string[] | undefined>
}): boolean {
  const type = req.headers['content-type']
  return typeof type === 'string' && type.split(';')[0]?.trim().toLowerCase() === FORM_TYPE
}

const tooLarge = () =>
  new AppError(413, ErrorType.invalidRequest, 'PAYLOAD_TOO_LARGE', 'Request body is too large')

/**
 * A `preParsing` hook for GET routes that take a urlencoded form body (legacy TrueVault clients
 * send `search_option` that way). Fastify never parses a GET body, so this reads it, under the
 * same body limit as any other body (413 beyond), and leaves the fields as `request.body`, where
 * the form merge of `http/body.ts` treats them like any form body. Other GET bodies are left
 * unread, as Fastify leaves them.
 */
export async function readFormBodyOnGet(request: FastifyRequest): Promise<void> {
  if (!isUrlencoded(request) || !hasBody(request)) return
  const limit =
    request.routeOptions.bodyLimit ?? request.server.initialConfig.bodyLimit ?? 1_048_576
  const declared = Number(request.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit) throw tooLarge()
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of request.raw) {
      size += (chunk as Buffer).length
      // Stop reading at the limit: a chunked body announces no length to check up front.
      if (size > limit) throw tooLarge()
      chunks.push(chunk as Buffer)
    }
  } catch (e) {
    if (e instanceof AppError) throw e
    // The client broke off its body (aborted, reset): its fault, not a server error.
    throw new AppError(400, ErrorType.invalidRequest, 'INVALID_BODY', 'Request body was cut off', {
      cause: e,
    })
  }
  request.body = parse(Buffer.concat(chunks).toString('utf8'))
}
