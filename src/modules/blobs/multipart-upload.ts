import type { Readable } from 'node:stream'
import type { FastifyRequest } from 'fastify'
import { AppError, ErrorType, errors } from '../../lib/errors.js'
import { MAX_BLOB_BYTES, type StoredContent, validateFilename } from './blobs.service.js'

export interface ReceivedUpload {
  content?: StoredContent
  filename?: string
  mimeType?: string
  /** Text parts, over query-string parameters of the same name. */
  fields: Record<string, string>
}

/**
 * Reads a multipart BLOB upload part by part: text parts are collected, the `file` part is
 * streamed straight into `store` (never buffered whole). If anything fails after the file was
 * stored, `discard` removes it, so a failed request leaves no object behind.
 */
export async function receiveUpload(
  req: FastifyRequest,
  store: (file: Readable) => Promise<StoredContent>,
  discard: (content: StoredContent) => Promise<void>,
): Promise<ReceivedUpload> {
  if (!req.isMultipart())
    throw errors.invalidField(
      'file',
      'must be sent as multipart/form-data or as the raw body (a urlencoded form cannot carry it)',
    )
  const received: ReceivedUpload = { fields: {} }
  // Errors of the store itself (S3 down, disk full) stay server errors; everything else that
  // goes wrong while reading the body is the client's malformed or truncated multipart.
  const storeFailures = new WeakSet<object>()
  for (const [key, value] of Object.entries(req.query as Record<string, unknown>)) {
    if (typeof value === 'string') received.fields[key.trim()] = value
  }
  try {
    // One byte over the limit reaches our own limiter, which answers 413.
    for await (const part of req.parts({
      limits: { fileSize: MAX_BLOB_BYTES + 1, fields: 20, parts: 30 },
    })) {
      if (part.type === 'field') {
        received.fields[part.fieldname.trim()] = String(part.value)
        continue
      }
      try {
        if (part.fieldname !== 'file')
          throw errors.invalidField(part.fieldname, 'is not a file field; send the BLOB as `file`')
        if (received.content) throw errors.invalidField('file', 'may be sent only once')
        received.filename = validateFilename(part.filename ?? '')
        received.mimeType = part.mimetype || 'application/octet-stream'
        let bodyError: unknown
        part.file.on('error', (e) => {
          bodyError ??= e
        })
        try {
          received.content = await store(part.file)
        } catch (error) {
          if (error !== bodyError && typeof error === 'object' && error !== null)
            storeFailures.add(error)
          throw error
        }
      } finally {
        // Whatever happened, drain the rest of this part so the request completes.
        if (!part.file.readableEnded) part.file.resume()
      }
    }
  } catch (error) {
    if (received.content) await discard(received.content)
    throw clientFault(error, storeFailures)
  }
  return received
}

/**
 * The multipart parser's own errors (no boundary, truncated or malformed parts) carry no status:
 * they are the client's fault, not a server failure (as for form routes, http/body.ts).
 */
function clientFault(error: unknown, storeFailures: WeakSet<object>): unknown {
  if (error instanceof AppError) return error
  if (typeof error === 'object' && error !== null && storeFailures.has(error)) return error
  const status = (error as { statusCode?: unknown } | null)?.statusCode
  if (typeof status === 'number' && status < 500) return error
  return new AppError(
    400,
    ErrorType.invalidRequest,
    'INVALID_MULTIPART',
    'Request body must be a valid multipart form',
    { cause: error },
  )
}
