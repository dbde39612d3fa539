import { errors } from '../../lib/errors.js'
import { isUuid } from '../../lib/ids.js'

/**
 * The search option, first pass (docs/search.md, "The search option" and "Filters"): its shape,
 * checked without the schema. `resolveSearch` (search-fields.ts) then looks the fields up and
 * coerces the values. Every failure is a 400 naming the offending part.
 */

export const MAX_PER_PAGE = 500
export const RESULT_WINDOW = 500
export const MAX_LIST_ITEMS = 1000
/**
 * Filter values in one search, all filters together (an `in`/`not_in` list counts its items,
 * any other filter one): bounds the work and the memory of one search (security review, 5).
 */
export const MAX_FILTER_VALUES = 1000
export const MAX_PATTERN = 1000
/**
 * Wildcards (`*` and `?` together) in one pattern: each `*` lets the matcher try every split of
 * the value, so they bound the work per candidate value (issue 14); 32 leaves room for formats
 * spelled out with `?` (a phone number, an SSN).
 */
export const MAX_PATTERN_WILDCARDS = 32
/**
 * Filters in one search: each is one subquery of the statement, so they bound its size and the
 * planner's work (issue 14). Filters do not nest: their depth is always one.
 */
export const MAX_FILTERS = 50
/**
 * Sort keys per search: each is one index seek per candidate, so a long list multiplies the
 * work of every candidate (the review's 100-key sort held the process for minutes).
 */
export const MAX_SORT_KEYS = 5
export const KM_PER_MILE = 1.609344
/** 100 miles, in either unit (docs/search.md rounds the km figure to 160.934). */
export const MAX_DISTANCE = { mi: 100, km: 100 * KM_PER_MILE } as const

export const FILTER_TYPES = [
  'eq',
  'not',
  'in',
  'not_in',
  'wildcard',
  'range',
  'geo_distance',
] as const
export type FilterType = (typeof FILTER_TYPES)[number]

export type Scalar = string | number | boolean
export type RangeOp = 'gt' | 'gte' | 'lt' | 'lte'
export const RANGE_OPS: readonly RangeOp[] = ['gt', 'gte', 'lt', 'lte']

export interface GeoValue {
  lat: number
  long: number
  distance: number
  unit: 'mi' | 'km'
}

/** A filter as sent, its value's shape checked for its type. */
export type ShapedFilter = { key: string; caseSensitive: boolean } & (
  | { type: 'eq' | 'not'; value: Scalar }
  | { type: 'in' | 'not_in'; value: Scalar[] }
  | { type: 'wildcard'; value: string }
  | { type: 'range'; value: Partial<Record<RangeOp, Scalar>> }
  | { type: 'geo_distance'; value: GeoValue }
)

export interface SortEntry {
  key: string
  direction: 'asc' | 'desc'
}

export interface OptionShape {
  /** Vault search only (user search ignores it). */
  schemaId: string | undefined
  filters: ShapedFilter[]
  filterType: 'and' | 'or'
  page: number
  perPage: number
  full: boolean
  sort: SortEntry[]
}

const TOP_LEVEL = new Set([
  'schema_id',
  'filter',
  'filter_type',
  'page',
  'per_page',
  'full_document',
  'full_doc',
  'sort',
  'case_sensitive',
])
const FILTER_KEYS = new Set(['type', 'value', 'case_sensitive'])

const bad = (part: string, problem: string) => errors.invalidField(`search_option.${part}`, problem)

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const isScalar = (value: unknown): value is Scalar =>
  typeof value === 'string' || typeof value === 'boolean' || typeof value === 'number'

function integer(value: unknown, part: string, min: number, max: number, fallback: number) {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw bad(part, `must be an integer from ${min} to ${max}`)
  }
  return value
}

function boolean(value: unknown, part: string): boolean | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'boolean') throw bad(part, 'must be true or false')
  return value
}

/** Checks everything that does not depend on the schema. */
export function parseOptionShape(raw: unknown, kind: 'vault' | 'users'): OptionShape {
  if (!isObject(raw)) throw errors.invalidField('search_option', 'must be a JSON object')
  for (const key of Object.keys(raw)) {
    if (!TOP_LEVEL.has(key)) throw bad(key, 'is not a search option')
  }
  let schemaId: string | undefined
  if (kind === 'vault') {
    if (raw.schema_id === undefined) throw bad('schema_id', 'is required')
    if (typeof raw.schema_id !== 'string' || !isUuid(raw.schema_id))
      throw bad('schema_id', 'must be a UUID')
    schemaId = raw.schema_id.toLowerCase()
  }
  const filterType = raw.filter_type ?? 'or'
  if (filterType !== 'and' && filterType !== 'or') throw bad('filter_type', 'must be and or or')
  const page = integer(raw.page, 'page', 1, RESULT_WINDOW, 1)
  const perPage = integer(raw.per_page, 'per_page', 1, MAX_PER_PAGE, 100)
  if (page * perPage > RESULT_WINDOW) {
    throw bad('page', `and per_page must stay within the first ${RESULT_WINDOW} results`)
  }
  // Both spellings must be booleans; `full_document` wins when both are given.
  const fullDoc = boolean(raw.full_doc, 'full_doc')
  const full = boolean(raw.full_document, 'full_document') ?? fullDoc ?? false
  const caseSensitive = boolean(raw.case_sensitive, 'case_sensitive') ?? true

  if (raw.filter === undefined) throw bad('filter', 'is required')
  if (!isObject(raw.filter)) throw bad('filter', 'must be an object of field name to filter')
  const entries = Object.entries(raw.filter)
  if (entries.length === 0) throw bad('filter', 'must have at least one entry')
  if (entries.length > MAX_FILTERS) throw bad('filter', `must have at most ${MAX_FILTERS} entries`)
  const filters = entries.map(([key, f]) => shapeFilter(key, f, caseSensitive))
  let values = 0
  for (const f of filters) {
    values += Array.isArray(f.value) ? f.value.length : 1
    if (values > MAX_FILTER_VALUES) {
      throw bad(
        `filter.${f.key}.value`,
        `brings the search to more than ${MAX_FILTER_VALUES} filter values in all`,
      )
    }
  }

  return { schemaId, filters, filterType, page, perPage, full, sort: parseSort(raw.sort) }
}

function shapeFilter(key: string, raw: unknown, defaultCase: boolean): ShapedFilter {
  const at = `filter.${key}`
  if (!isObject(raw)) throw bad(at, 'must be an object with type and value')
  for (const k of Object.keys(raw)) {
    if (!FILTER_KEYS.has(k)) throw bad(`${at}.${k}`, 'is not a filter property')
  }
  const type = raw.type
  if (typeof type !== 'string' || !(FILTER_TYPES as readonly string[]).includes(type)) {
    throw bad(`${at}.type`, `must be one of ${FILTER_TYPES.join(', ')}`)
  }
  const caseSensitive = boolean(raw.case_sensitive, `${at}.case_sensitive`) ?? defaultCase
  const v = raw.value
  const vat = `${at}.value`
  if (v === undefined) throw bad(vat, 'is required')
  switch (type as FilterType) {
    case 'eq':
    case 'not':
      if (!isScalar(v)) throw bad(vat, 'must be a string, number or boolean')
      return { key, caseSensitive, type: type as 'eq' | 'not', value: v }
    case 'in':
    case 'not_in': {
      if (!Array.isArray(v) || v.length === 0) throw bad(vat, 'must be a non-empty array')
      if (v.length > MAX_LIST_ITEMS) throw bad(vat, `must have at most ${MAX_LIST_ITEMS} items`)
      v.forEach((item, i) => {
        if (!isScalar(item)) throw bad(`${vat}[${i}]`, 'must be a string, number or boolean')
      })
      return { key, caseSensitive, type: type as 'in' | 'not_in', value: v as Scalar[] }
    }
    case 'wildcard':
      if (typeof v !== 'string') throw bad(vat, 'must be a string pattern')
      if (v.length > MAX_PATTERN) throw bad(vat, `must be at most ${MAX_PATTERN} characters`)
      if ((v.match(/[*?]/g)?.length ?? 0) > MAX_PATTERN_WILDCARDS)
        throw bad(vat, `must have at most ${MAX_PATTERN_WILDCARDS} wildcards (* and ?)`)
      return { key, caseSensitive, type: 'wildcard', value: v }
    case 'range': {
      if (!isObject(v)) throw bad(vat, 'must be an object with gt, gte, lt or lte')
      const bounds: Partial<Record<RangeOp, Scalar>> = {}
      for (const [op, bound] of Object.entries(v)) {
        if (!(RANGE_OPS as readonly string[]).includes(op))
          throw bad(`${vat}.${op}`, 'is not a range bound (gt, gte, lt, lte)')
        if (!isScalar(bound)) throw bad(`${vat}.${op}`, 'must be a string or number')
        bounds[op as RangeOp] = bound
      }
      if (Object.keys(bounds).length === 0)
        throw bad(vat, 'must have at least one of gt, gte, lt, lte')
      return { key, caseSensitive, type: 'range', value: bounds }
    }
    case 'geo_distance':
      return { key, caseSensitive, type: 'geo_distance', value: shapeGeo(v, vat) }
  }
}

function shapeGeo(v: unknown, vat: string): GeoValue {
  if (!isObject(v)) throw bad(vat, 'must be an object with lat, long, distance and unit')
  for (const k of Object.keys(v)) {
    if (!['lat', 'long', 'distance', 'unit'].includes(k))
      throw bad(`${vat}.${k}`, 'is not a geo_distance property')
  }
  const { lat, long, distance, unit } = v
  if (typeof lat !== 'number' || !(lat >= -90 && lat <= 90))
    throw bad(`${vat}.lat`, 'must be a number from -90 to 90')
  if (typeof long !== 'number' || !(long >= -180 && long <= 180))
    throw bad(`${vat}.long`, 'must be a number from -180 to 180')
  if (unit !== 'mi' && unit !== 'km') throw bad(`${vat}.unit`, 'must be mi or km')
  if (typeof distance !== 'number' || !(distance > 0) || distance > MAX_DISTANCE[unit]) {
    throw bad(`${vat}.distance`, 'must be a number above 0 and at most 100 mi (160.9344 km)')
  }
  return { lat, long, distance, unit }
}

function parseSort(raw: unknown): SortEntry[] {
  if (raw === undefined) return []
  if (!Array.isArray(raw)) throw bad('sort', 'must be an array of {field: "asc" | "desc"}')
  if (raw.length > MAX_SORT_KEYS) throw bad('sort', `must have at most ${MAX_SORT_KEYS} keys`)
  return raw.map((entry, i) => {
    const keys = isObject(entry) ? Object.keys(entry) : []
    if (keys.length !== 1) throw bad(`sort[${i}]`, 'must be an object with exactly one field')
    const key = keys[0] as string
    const direction = (entry as Record<string, unknown>)[key]
    if (direction !== 'asc' && direction !== 'desc')
      throw bad(`sort[${i}].${key}`, 'must be asc or desc')
    return { key, direction }
  })
}
