/**
 * What a document contributes to the search index (docs/search.md, "Schemas and the index"):
 * pure functions, shared by the indexer and the query compiler so both coerce alike.
 */
export const FIELD_TYPES = [
  'string',
  'integer',
  'long',
  'float',
  'double',
  'boolean',
  'date',
  'geo_point',
] as const
export type FieldType = (typeof FIELD_TYPES)[number]

export interface SchemaField {
  name: string
  type: FieldType
  index: boolean
}

/** One row of `search_index` for a field (without account, schema and document ids). */
export interface IndexValue {
  field: string
  ord: number
  value_text: string | null
  value_lower: string | null
  value_num: number | null
  geo_lat: number | null
  geo_long: number | null
}

export const MAX_INDEXED_STRING = 1000
/**
 * Index rows one document (or user) may make: one 190,000-element array once wrote ~146 MB of
 * index in one request and stalled the server for seconds (security review, finding 4).
 */
export const MAX_VALUES_PER_FIELD = 1000
export const MAX_ROWS_PER_DOCUMENT = 10_000

/** What every user exposes to user search, beside the user schema's fields (docs/search.md). */
export const USER_SYSTEM_FIELDS: readonly SchemaField[] = [
  { name: '$sys.id', type: 'string', index: true },
  { name: '$sys.username', type: 'string', index: true },
  { name: '$sys.status', type: 'string', index: true },
  { name: '$sys.created_at', type: 'date', index: true },
]

const NUMERIC: ReadonlySet<FieldType> = new Set(['integer', 'long', 'float', 'double'])
export const isNumericType = (t: FieldType) => NUMERIC.has(t)

/** Every value at a dotted path; arrays met on the way (or at the end) are walked element-wise. */
export function valuesAt(node: unknown, path: string): unknown[] {
  return walk(node, path.split('.'), 0)
}

function walk(node: unknown, parts: string[], i: number): unknown[] {
  if (Array.isArray(node)) return node.flatMap((element) => walk(element, parts, i))
  if (i === parts.length) return node === null || node === undefined ? [] : [node]
  if (typeof node !== 'object' || node === null) return []
  const key = parts[i] as string
  if (!Object.hasOwn(node, key)) return []
  return walk((node as Record<string, unknown>)[key], parts, i + 1)
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/

/** A date as epoch milliseconds: `YYYY-MM-DD`, ISO date-time (no offset: UTC) or integer ms. */
export function parseDate(raw: unknown): number | undefined {
  if (typeof raw === 'number') return Number.isSafeInteger(raw) ? raw : undefined
  if (typeof raw !== 'string') return undefined
  const text = raw.trim()
  const m = DATE_ONLY.exec(text) ?? DATE_TIME.exec(text)
  if (!m) return undefined
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])]
  const day = new Date(Date.UTC(y, mo - 1, d))
  // Reject dates the calendar does not have (2030-02-31 would roll into March).
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d)
    return undefined
  if (m.length === 4 || m[4] === undefined) return day.getTime()
  const [h, mi, s] = [Number(m[4]), Number(m[5]), Number(m[6] ?? 0)]
  if (h > 23 || mi > 59 || s > 59) return undefined
  const zone = m[8] ?? 'Z'
  const ms = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0
  const offset = zone === 'Z' ? 0 : parseOffset(zone)
  return Date.UTC(y, mo - 1, d, h, mi, s, ms) - offset
}

function parseOffset(zone: string): number {
  const sign = zone.startsWith('-') ? -1 : 1
  const digits = zone.slice(1).replace(':', '')
  return sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4))) * 60_000
}

/** The comparable form of a raw value under a field type, or undefined when it does not coerce. */
export function coerce(
  type: FieldType,
  raw: unknown,
): Omit<IndexValue, 'field' | 'ord'> | undefined {
  const empty = {
    value_text: null,
    value_lower: null,
    value_num: null,
    geo_lat: null,
    geo_long: null,
  }
  switch (type) {
    case 'string': {
      let text: string
      if (typeof raw === 'string') text = raw
      else if ((typeof raw === 'number' && Number.isFinite(raw)) || typeof raw === 'boolean')
        text = JSON.stringify(raw)
      else return undefined
      text = text.slice(0, MAX_INDEXED_STRING)
      return { ...empty, value_text: text, value_lower: text.toLowerCase() }
    }
    case 'integer':
    case 'long': {
      const n =
        typeof raw === 'number'
          ? raw
          : typeof raw === 'string' && /^\s*-?\d+\s*$/.test(raw)
            ? Number(raw)
            : Number.NaN
      return Number.isSafeInteger(n) ? { ...empty, value_num: n } : undefined
    }
    case 'float':
    case 'double': {
      const n =
        typeof raw === 'number'
          ? raw
          : typeof raw === 'string' && raw.trim() !== ''
            ? Number(raw)
            : Number.NaN
      return Number.isFinite(n) ? { ...empty, value_num: n } : undefined
    }
    case 'boolean': {
      const b =
        raw === true || raw === 'true' ? true : raw === false || raw === 'false' ? false : undefined
      return b === undefined
        ? undefined
        : { ...empty, value_num: b ? 1 : 0, value_text: String(b), value_lower: String(b) }
    }
    case 'date': {
      const ms = parseDate(raw)
      return ms === undefined ? undefined : { ...empty, value_num: ms }
    }
    case 'geo_point': {
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined
      const { lat, long } = raw as { lat?: unknown; long?: unknown }
      if (typeof lat !== 'number' || typeof long !== 'number') return undefined
      if (!(lat >= -90 && lat <= 90 && long >= -180 && long <= 180)) return undefined
      return { ...empty, geo_lat: lat, geo_long: long }
    }
  }
}

/** All index rows of a document under the schema's indexed fields. */
export function indexValues(fields: readonly SchemaField[], doc: unknown): IndexValue[] {
  const rows: IndexValue[] = []
  for (const field of fields) {
    if (!field.index) continue
    let ord = 0
    for (const raw of valuesAt(doc, field.name)) {
      const value = coerce(field.type, raw)
      if (value) rows.push({ field: field.name, ord: ord++, ...value })
    }
  }
  return rows
}

/** The first index limit a document passes: the field it was passed at, and how. */
export interface IndexOverflow {
  field: string
  problem: string
}

/**
 * `indexValues` within MAX_VALUES_PER_FIELD and MAX_ROWS_PER_DOCUMENT: the rows that fit, and
 * the first limit passed (if any). Stops early, so an oversized document costs no more rows.
 */
export function boundedIndexValues(
  fields: readonly SchemaField[],
  doc: unknown,
  alreadyUsed = 0,
): { rows: IndexValue[]; overflow?: IndexOverflow } {
  const rows: IndexValue[] = []
  let overflow: IndexOverflow | undefined
  for (const field of fields) {
    if (!field.index) continue
    let ord = 0
    for (const raw of valuesAt(doc, field.name)) {
      const value = coerce(field.type, raw)
      if (!value) continue
      if (ord === MAX_VALUES_PER_FIELD) {
        overflow ??= {
          field: field.name,
          problem: `has more than ${MAX_VALUES_PER_FIELD} values to index (the most one indexed field of a document takes)`,
        }
        break
      }
      if (alreadyUsed + rows.length === MAX_ROWS_PER_DOCUMENT) {
        overflow ??= {
          field: field.name,
          problem: `brings the document over ${MAX_ROWS_PER_DOCUMENT} indexed values in all (the most one document takes)`,
        }
        return { rows, overflow }
      }
      rows.push({ field: field.name, ord: ord++, ...value })
    }
  }
  return overflow ? { rows, overflow } : { rows }
}
