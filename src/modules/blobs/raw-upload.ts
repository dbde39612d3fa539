import type { Readable } from 'node:stream'
import type { FastifyRequest } from 'fastify'
import { rawUploadBody } from '../../http/body.js'
import { AppError, ErrorType, errors } from '../../lib/errors.js'
import { optionalId } from '../documents/document-input.js'
import {
  blobTooLarge,
  MAX_BLOB_BYTES,
  type StoredContent,
  validateFilename,
} from './blobs.service.js'
import { dispositionFilename } from './disposition-filename.js'
import type { ReceivedUpload } from './multipart-upload.js'

/** The longest Content-Type stored for a raw upload (it is sent back on every download). */
export const MAX_MEDIA_TYPE = 255

/** True when the request carries its file as the raw body (or carries no body at all). */
export function isRawUpload(req: FastifyRequest): boolean {
  return rawUploadBody(req) !== undefined || req.headers['content-type'] === undefined
}

/** What a raw upload says before its body: read and checked by `checkRawUpload`. */
interface RawUploadHead {
  fields: Record<string, string>
  filename?: string
  mimeType?: string
  /** The parsed `owner_id`: null for none, undefined when not given. */
  ownerId: string | null | undefined
}

const heads = new WeakMap<FastifyRequest, RawUploadHead>()

/**
 * A `preValidation` hook of the upload routes: everything a raw upload names before its body
 * (filename, type, declared size, owner) is checked here, before the access rule lets the
 * request through, so an invalid one is a 400 (or 413) that takes no SAT use (decision 47) and
 * the route's rule can name the exact owner (`rawUploadOwner`). Multipart requests pass as is.
 */
export async function checkRawUpload(req: FastifyRequest): Promise<void> {
  if (!isRawUpload(req)) return
  const fields = queryFields(req)
  const head: RawUploadHead = { fields, ownerId: optionalId(fields.owner_id, 'owner_id') }
  const filename = filenameOf(req, fields)
  if (filename !== undefined) head.filename = validateFilename(filename, 'filename')
  const type = req.headers['content-type']?.trim()
  if (type !== undefined) {
    if (type.length > MAX_MEDIA_TYPE)
      throw errors.invalidField('Content-Type', `must be at most ${MAX_MEDIA_TYPE} characters`)
    head.mimeType = type
  }
  // A declared size over the limit is refused before anything is stored.
  if (Number(req.headers['content-length']) > MAX_BLOB_BYTES) throw blobTooLarge()
  heads.set(req, head)
}

/**
 * The owner a raw upload names in its query (null: none), once `checkRawUpload` has run; undefined
 * for multipart, whose owner may follow the file.
 */
export function rawUploadOwner(req: FastifyRequest): string | null | undefined {
  const head = heads.get(req)
  return head === undefined ? undefined : (head.ownerId ?? null)
}

/**
 * Reads a raw BLOB upload (docs/truevault-clients.md §1): the body is the file, streamed straight
 * into `store`; its type is the request's Content-Type; its name comes from the `filename` or
 * `name` query parameter, else `Content-Disposition`, else none (undefined). Other query parameters
 * (`owner_id`) are the form fields. An empty body is no file: nothing is stored. The route runs
 * `checkRawUpload` first.
 */
export async function receiveRawUpload(
  req: FastifyRequest,
  store: (file: Readable) => Promise<StoredContent>,
): Promise<ReceivedUpload> {
  const head = heads.get(req)
  if (!head) throw new Error('checkRawUpload did not run for this raw upload')
  const received: ReceivedUpload = { fields: head.fields }
  if (head.filename !== undefined) received.filename = head.filename
  if (head.mimeType !== undefined) received.mimeType = head.mimeType
  const body = rawUploadBody(req)
  if (!body || !(await hasBytes(body).catch(incomplete))) return received
  let bodyError: unknown
  body.on('error', (e) => {
    bodyError ??= e
  })
  try {
    received.content = await store(body)
  } catch (error) {
    if (!body.readableEnded) body.resume()
    // The client hung up or sent a broken body: its fault, not a server failure.
    if (error === bodyError && !(error instanceof AppError)) incomplete(error)
    throw error
  }
  return received
}

function incomplete(cause: unknown): never {
  throw new AppError(
    400,
    ErrorType.invalidRequest,
    'INCOMPLETE_BODY',
    'Request body ended before it was complete',
    { cause },
  )
}

/** Query parameters are a raw upload's form fields (names trimmed, as for multipart). */
export function queryFields(req: FastifyRequest): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const [key, value] of Object.entries(req.query as Record<string, unknown>)) {
    if (typeof value === 'string') fields[key.trim()] = value
  }
  return fields
}

function filenameOf(req: FastifyRequest, fields: Record<string, string>): string | undefined {
  if (fields.filename !== undefined) return fields.filename
  if (fields.name !== undefined) return fields.name
  const disposition = req.headers['content-disposition']
  return disposition === undefined ? undefined : dispositionFilename(disposition)
}

/**
 * Waits for the first bytes of `body` (true) or its end (false) without consuming anything: the
 * first chunk is put back, so an empty body never creates an object in the store.
 */
function hasBytes(body: Readable): Promise<boolean> {
  if (body.readableEnded) return Promise.resolve(false)
  return new Promise((resolve, reject) => {
    const settle = (result: boolean | Error) => {
      body.off('readable', onReadable)
      body.off('end', onEnd)
      body.off('error', onError)
      if (result instanceof Error) reject(result)
      else resolve(result)
    }
    const onReadable = () => {
      const chunk: Buffer | null = body.read()
      if (chunk === null) return
      body.unshift(chunk)
      settle(chunk.length > 0)
    }
    const onEnd = () => settle(false)
    const onError = (e: Error) => settle(e)
    body.on('readable', onReadable)
    body.once('end', onEnd)
    body.once('error', onError)
  })
}
