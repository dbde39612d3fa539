import type { ValidateFunction } from 'ajv'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'

/** One answer to check: the operation (method and OpenAPI path template) and what was sent. */
export interface SentResponse {
  method: string
  /** The OpenAPI path template, `/v1/users/{user_id}`. */
  path: string
  status: number
  /** The Content-Type header as sent (parameters allowed); undefined when there is none. */
  contentType: string | undefined
  /** The body as sent; undefined when it was streamed (only its status and type are checked). */
  body: string | Buffer | undefined
}

interface MediaObject {
  schema?: Record<string, unknown>
}
interface ResponseObject {
  content?: Record<string, MediaObject>
}
type Operation = { responses?: Record<string, ResponseObject> }
type OpenApiDocument = {
  paths?: Record<string, Record<string, Operation>>
  components?: unknown
}

const DOC_ID = 'openapi-document'

/** JSON Pointer escaping (RFC 6901) of one path segment. */
const pointer = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1')

/** A path template with its parameter names left out: `/v1/users/{}`. */
const shape = (path: string) => path.replace(/\{[^}]*\}/g, '{}')

/** `application/problem+json` and `application/json` are both JSON. */
const isJson = (mediaType: string) =>
  mediaType === 'application/json' || mediaType.endsWith('+json')

/** Bytes of any kind: the body is not checked beyond its media type. */
const isBinary = (schema: Record<string, unknown> | undefined) =>
  schema?.type === 'string' &&
  (schema.format === 'binary' || typeof schema.contentMediaType === 'string')

/**
 * Says whether a response is described by an OpenAPI 3.1 document: its status (exact, then the
 * `4XX` range, then `default`), its media type (exact, then `type/*`, then `*\/*`) and its body
 * against that media type's schema (JSON Schema 2020-12, with the document's own `$ref`s).
 * Validators are compiled on first use and kept: build one contract per document.
 */
export class ResponseContract {
  private readonly ajv: Ajv2020
  private readonly validators = new Map<string, ValidateFunction>()
  private readonly doc: OpenApiDocument
  /** Document path by shape: the server may name a path parameter otherwise than the document. */
  private readonly pathsByShape = new Map<string, string>()

  /** `document`: a parsed OpenAPI 3.1 document (its schemas are JSON Schema 2020-12). */
  constructor(document: object) {
    this.doc = document as OpenApiDocument
    // OpenAPI adds keywords of its own (`example`, `discriminator`): not errors here.
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
    addFormats.default(this.ajv)
    for (const format of ['binary', 'byte', 'int32', 'int64', 'float', 'double', 'password'])
      this.ajv.addFormat(format, true)
    this.ajv.addSchema(document, DOC_ID)
    for (const path of Object.keys(this.doc.paths ?? {})) this.pathsByShape.set(shape(path), path)
  }

  /** Undefined when the response is described; otherwise what does not match. */
  check(sent: SentResponse): string | undefined {
    const where = `${sent.method.toUpperCase()} ${sent.path} -> ${sent.status}`
    const method = sent.method.toLowerCase()
    const path = this.doc.paths?.[sent.path] ? sent.path : this.pathsByShape.get(shape(sent.path))
    const operation = path === undefined ? undefined : this.doc.paths?.[path]?.[method]
    if (!operation || path === undefined) return `${where}: no such operation in the document`
    const statusKey = this.statusKey(operation, sent.status)
    if (statusKey === undefined) return `${where}: status not documented`
    const response = operation.responses?.[statusKey] as ResponseObject
    const empty = sent.body !== undefined && sent.body.length === 0
    if (!response.content || Object.keys(response.content).length === 0)
      return empty ? undefined : `${where}: a body was sent but the document describes none`
    const mediaType = sent.contentType?.split(';')[0]?.trim().toLowerCase()
    if (!mediaType) return `${where}: no Content-Type, document says ${this.types(response)}`
    const mediaKey = this.mediaKey(response, mediaType)
    if (mediaKey === undefined)
      return `${where}: media type ${mediaType} not documented (${this.types(response)})`
    const schema = response.content[mediaKey]?.schema
    if (!schema || sent.body === undefined || isBinary(schema)) return undefined
    const text = typeof sent.body === 'string' ? sent.body : sent.body.toString('utf8')
    let value: unknown = text
    if (isJson(mediaType)) {
      try {
        value = JSON.parse(text)
      } catch {
        return `${where}: ${mediaType} body is not JSON`
      }
    }
    const validate = this.validator([path, method, 'responses', statusKey, 'content', mediaKey])
    if (validate(value)) return undefined
    const detail = this.ajv.errorsText(validate.errors, { dataVar: 'body' })
    return `${where} (${mediaType}): ${detail}\n  body: ${text.slice(0, 500)}`
  }

  private statusKey(operation: Operation, status: number): string | undefined {
    const keys = Object.keys(operation.responses ?? {})
    const range = `${String(status)[0]}XX`
    return (
      keys.find((k) => k === String(status)) ??
      keys.find((k) => k.toUpperCase() === range) ??
      keys.find((k) => k === 'default')
    )
  }

  private mediaKey(response: ResponseObject, mediaType: string): string | undefined {
    const keys = Object.keys(response.content ?? {})
    const byLower = (wanted: string) => keys.find((k) => k.toLowerCase() === wanted)
    return byLower(mediaType) ?? byLower(`${mediaType.split('/')[0]}/*`) ?? byLower('*/*')
  }

  private types(response: ResponseObject): string {
    return Object.keys(response.content ?? {}).join(', ') || 'no body'
  }

  private validator(location: string[]): ValidateFunction {
    const ref = `${DOC_ID}#/paths/${location.map(pointer).join('/')}/schema`
    const known = this.validators.get(ref)
    if (known) return known
    const validate = this.ajv.compile({ $ref: ref })
    this.validators.set(ref, validate)
    return validate
  }
}
