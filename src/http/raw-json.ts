import type { FastifyReply } from 'fastify'
import { JSON_TYPE } from './common-hooks.js'

/**
 * JSON text that goes into an answer as it is. A document's decrypted content is the text
 * JSON.stringify made when it was stored, so parsing it only to stringify it again doubles the
 * work (most of a large document's read). `toJSON` keeps any other serializer right: it gets the
 * parsed value (paying the parse), never the wrapper.
 */
export class RawJson {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text)
  }
}

/**
 * Sends `payload` (after the preSerialization hooks: the envelope, the audit trail's ids) with
 * every RawJson written as its text, typed exactly `application/json` as every JSON answer is
 * (http/common-hooks.ts: with a serializer of its own Fastify adds no charset).
 */
export function sendWithRawJson<T>(reply: FastifyReply, payload: T): T {
  reply.serializer(stringifyWithRaw).type(JSON_TYPE)
  return payload
}

/** JSON.stringify for the plain data of an answer, with every RawJson written as its text. */
export function stringifyWithRaw(value: unknown): string {
  return write(value) ?? 'null'
}

/** A value's JSON, or undefined where JSON.stringify leaves it out (undefined, functions). */
function write(value: unknown): string | undefined {
  if (value instanceof RawJson) return value.text
  if (value === null) return 'null'
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
      return JSON.stringify(value)
    case 'object':
      break
    default:
      return undefined
  }
  const object = value as { toJSON?: () => unknown }
  if (typeof object.toJSON === 'function') return write(object.toJSON())
  if (Array.isArray(value)) return `[${value.map((item) => write(item) ?? 'null').join(',')}]`
  let out = ''
  for (const key of Object.keys(value)) {
    const text = write((value as Record<string, unknown>)[key])
    if (text === undefined) continue
    out += `${out === '' ? '' : ','}${JSON.stringify(key)}:${text}`
  }
  return `{${out}}`
}
