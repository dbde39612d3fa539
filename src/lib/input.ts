import { errors } from './errors.js'
import { isUuid } from './ids.js'

/** `full` and similar flags: the SDKs send `true`, community clients `1` and `01`. */
export function isTrue(value: unknown): boolean {
  if (value === true) return true
  if (typeof value !== 'string') return false
  const v = value.trim().toLowerCase()
  return v === 'true' || v === '1' || v === '01'
}

/**
 * Decodes a base64 JSON field as v1 clients send it. Ruby's encoder inserts newlines every
 * 60 characters (dropped), URL-encoded forms turn an unescaped `+` into a space (restored), and
 * URL-safe letters are accepted.
 */
export function decodeBase64Json(value: unknown, field: string): unknown {
  if (typeof value !== 'string') throw errors.invalidField(field, 'must be a base64 string')
  // A raw `+` in an urlencoded body arrives as a space; other whitespace is line wrapping.
  const compact = value.replace(/ /g, '+').replace(/\s+/g, '').replace(/-/g, '+').replace(/_/g, '/')
  if (compact.length === 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 === 1) {
    throw errors.invalidField(field, 'must be base64-encoded JSON')
  }
  let text: string
  try {
    // Fatal: bytes that are not UTF-8 were silently turned into U+FFFD (data changed unseen).
    text = UTF8.decode(Buffer.from(compact, 'base64'))
  } catch {
    throw errors.invalidField(field, 'must be base64-encoded JSON in UTF-8')
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw errors.invalidField(field, 'must be base64-encoded JSON')
  }
  if (jsonTooDeep(parsed))
    throw errors.invalidField(field, `must not nest deeper than ${MAX_JSON_DEPTH} levels`)
  // Decoded content never passes the request-wide check (http/input-guard.ts): check it here.
  const malformed = findMalformed(parsed, field)
  if (malformed) throw errors.invalidField(malformed.field, malformed.problem)
  return parsed
}

const UTF8 = new TextDecoder('utf-8', { fatal: true })

/** `String.prototype.isWellFormed` (Node 20; not yet in TypeScript's ES2023 library). */
export function isWellFormedText(text: string): boolean {
  return (text as string & { isWellFormed(): boolean }).isWellFormed()
}

export const ILL_FORMED_TEXT = 'must be well-formed Unicode text (no unpaired surrogate)'
export const NON_FINITE_NUMBER = 'must be a finite number'

export interface MalformedInput {
  /** Dotted path of the offending value (`document.items.0.name`), or `root` itself. */
  field: string
  problem: string
}

/**
 * The first text that is not well-formed Unicode (an unpaired surrogate, which JSON's `\ud800`
 * escape produces; it cannot be stored as UTF-8 and makes `encodeURIComponent` throw) or number
 * that is not finite (`1e400` parses to Infinity; a coerced `page=Infinity` reached SQL) in a
 * parsed input, names and values alike, in document order. Only plain objects and arrays are
 * entered (buffers and streams are not text), to MAX_JSON_DEPTH: every parser refuses deeper
 * input first. The path is built only for the offender (a 1 MB body is walked in a few ms).
 */
export function findMalformed(value: unknown, root: string): MalformedInput | undefined {
  const path: string[] = []
  const problem = problemAt(value, path, 0)
  if (problem === undefined) return undefined
  if (root !== '') path.unshift(root)
  return { field: path.length > 0 ? shortened(path.join('.')) : 'request', problem }
}

/** Field paths are client text echoed in the error: at most this many characters. */
const MAX_FIELD_PATH = 200

/** Cut by code points, never inside a surrogate pair (the message must stay well-formed). */
function shortened(text: string): string {
  if (text.length <= MAX_FIELD_PATH) return text
  return `${[...text].slice(0, MAX_FIELD_PATH - 1).join('')}…`
}

/** What is wrong in `value`, its path (relative to `value`) left in `path`; or undefined. */
function problemAt(value: unknown, path: string[], depth: number): string | undefined {
  if (typeof value === 'string') return isWellFormedText(value) ? undefined : ILL_FORMED_TEXT
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : NON_FINITE_NUMBER
  if (typeof value !== 'object' || value === null || depth >= MAX_JSON_DEPTH) return undefined
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = problemAt(value[i], path, depth + 1)
      if (problem !== undefined) {
        path.unshift(String(i))
        return problem
      }
    }
    return undefined
  }
  if (!isDictionary(value)) return undefined
  const entries = value as Record<string, unknown>
  for (const key in entries) {
    if (!Object.hasOwn(entries, key)) continue
    if (!isWellFormedText(key)) {
      // Shown escaped (`"\ud800"`), so that the message itself is well-formed text.
      path.unshift(JSON.stringify(key))
      return `name ${ILL_FORMED_TEXT}`
    }
    const problem = problemAt(entries[key], path, depth + 1)
    if (problem !== undefined) {
      path.unshift(key)
      return problem
    }
  }
  return undefined
}

/** Plain objects, null-prototype ones, and the query parser's `Empty` dictionaries. */
function isDictionary(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null || Object.getPrototypeOf(proto) === null
}

/**
 * Deepest nesting of arrays and objects accepted in client JSON. JSON.parse takes any depth, but
 * JSON.stringify (storing it) overflows the stack from a few thousand levels: a 10 kB body of
 * brackets was a 500.
 */
export const MAX_JSON_DEPTH = 256

/** True when a parsed JSON value nests deeper than `max` (iterative: no stack to overflow). */
export function jsonTooDeep(value: unknown, max = MAX_JSON_DEPTH): boolean {
  const pending: [unknown, number][] = [[value, 1]]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, depth] = next
    if (typeof node !== 'object' || node === null) continue
    if (depth > max) return true
    for (const child of Object.values(node)) {
      if (typeof child === 'object' && child !== null) pending.push([child, depth + 1])
    }
  }
  return false
}

export function encodeBase64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64')
}

/** Comma-separated id list (`group_ids`, `user_ids`, path lists); empty text is an empty list. */
export function parseIdList(
  value: unknown,
  field: string,
  max = Number.POSITIVE_INFINITY,
): string[] {
  if (value === undefined || value === null) return []
  const items = Array.isArray(value)
    ? value
    : typeof value === 'string'
      ? value.split(',')
      : undefined
  if (!items) throw errors.invalidField(field, 'must be a comma-separated list of ids')
  const ids: string[] = []
  for (const raw of items) {
    if (typeof raw !== 'string') throw errors.invalidField(field, 'must contain only string ids')
    const id = raw.trim()
    if (id === '') continue
    if (!isUuid(id))
      throw errors.invalidField(field, `contains an invalid UUID: ${id.slice(0, 64)}`)
    ids.push(id.toLowerCase())
  }
  if (ids.length > max) throw errors.invalidField(field, `may hold at most ${max} ids`)
  return [...new Set(ids)]
}

/**
 * An ISO 8601 timestamp that must lie in the future (token expiries). Returns the normalized
 * `toISOString()` form, which sorts correctly as text in both databases.
 */
export function parseFutureTime(value: unknown, field: string, now: Date): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw errors.invalidField(field, 'must be an ISO 8601 timestamp')
  }
  const text = value.trim()
  const m = /^(\d{4}-\d{2}-\d{2})([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.exec(
    text,
  )
  if (!m) throw errors.invalidField(field, 'must be an ISO 8601 timestamp')
  // A time without an offset is UTC (as a bare date is), never the server's local time; and an
  // impossible day (Feb 31) is refused instead of rolling over into the next month.
  const at = new Date(m[2] !== undefined && m[5] === undefined ? `${text}Z` : text)
  const day = new Date(`${m[1]}T00:00:00Z`)
  if (
    Number.isNaN(at.getTime()) ||
    Number.isNaN(day.getTime()) ||
    day.toISOString().slice(0, 10) !== m[1]
  ) {
    throw errors.invalidField(field, 'must be an ISO 8601 timestamp')
  }
  if (at.getTime() <= now.getTime()) throw errors.invalidField(field, 'must be in the future')
  return at.toISOString()
}
