import { coerce, type FieldType, type SchemaField } from '../../indexing/index-values.js'
import { errors } from '../../lib/errors.js'
import {
  type GeoValue,
  KM_PER_MILE,
  type OptionShape,
  RANGE_OPS,
  type Scalar,
  type ShapedFilter,
} from './search-options.js'

/**
 * The search option, second pass: field names looked up among the schema's indexed fields and
 * filter values coerced exactly as indexed values are (`coerce`), giving the typed query the
 * compiler turns into SQL (docs/search.md).
 */

/** The index column a comparison reads. */
export type Column = 'value_text' | 'value_lower' | 'value_num'

/** The point of a geo filter; `km` is the radius in kilometres. */
export interface GeoPoint {
  lat: number
  long: number
  km: number
  unit: 'mi' | 'km'
}

export type Filter =
  | { kind: 'match'; negate: boolean; field: string; column: Column; values: (string | number)[] }
  | {
      kind: 'range'
      field: string
      column: Column
      bounds: { op: '>' | '>=' | '<' | '<='; value: string | number }[]
    }
  | { kind: 'wildcard'; field: string; column: 'value_text' | 'value_lower'; pattern: string }
  | { kind: 'geo'; field: string; point: GeoPoint }

export type SortKey =
  | { field: string; direction: 'asc' | 'desc'; column: 'value_text' | 'value_num' }
  | { field: string; direction: 'asc' | 'desc'; column: 'geo'; point: GeoPoint }

export interface SearchQuery {
  filters: Filter[]
  filterType: 'and' | 'or'
  page: number
  perPage: number
  full: boolean
  sort: SortKey[]
}

const bad = (part: string, problem: string) => errors.invalidField(`search_option.${part}`, problem)
const OPS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const

const TYPE_PROBLEM: Record<FieldType, string> = {
  string: 'must be a string, number or boolean',
  integer: 'must be an integer',
  long: 'must be an integer',
  float: 'must be a number',
  double: 'must be a number',
  boolean: 'must be true or false',
  date: 'must be a date (YYYY-MM-DD, ISO-8601 date-time or epoch milliseconds)',
  geo_point: 'must be a geo point',
}

/** `$tv.x` is the older spelling of `$sys.x`. */
export const canonicalField = (name: string) =>
  name.startsWith('$tv.') ? `$sys.${name.slice(4)}` : name

function lookup(fields: readonly SchemaField[], key: string, part: string): SchemaField {
  const name = canonicalField(key)
  const field = fields.find((f) => f.name === name)
  if (!field) throw bad(part, 'is not a field of the schema')
  if (!field.index) throw bad(part, 'is not an indexed field of the schema')
  return field
}

/** A filter value in the form its column holds it. */
function comparable(field: SchemaField, raw: Scalar, cs: boolean, part: string): string | number {
  const value = coerce(field.type, raw)
  if (!value) throw bad(part, TYPE_PROBLEM[field.type])
  if (field.type === 'string') return (cs ? value.value_text : value.value_lower) as string
  return value.value_num as number
}

const columnOf = (field: SchemaField, cs: boolean): Column =>
  field.type === 'string' ? (cs ? 'value_text' : 'value_lower') : 'value_num'

function geoPoint(v: GeoValue): GeoPoint {
  const km = v.unit === 'mi' ? v.distance * KM_PER_MILE : v.distance
  return { lat: v.lat, long: v.long, km, unit: v.unit }
}

function resolveFilter(f: ShapedFilter, field: SchemaField): Filter {
  const at = `filter.${f.key}`
  const name = field.name
  if (field.type === 'geo_point' && f.type !== 'geo_distance')
    throw bad(`${at}.type`, 'must be geo_distance on a geo_point field')
  const cs = f.caseSensitive
  switch (f.type) {
    case 'eq':
    case 'not':
      return {
        kind: 'match',
        negate: f.type === 'not',
        field: name,
        column: columnOf(field, cs),
        values: [comparable(field, f.value, cs, `${at}.value`)],
      }
    case 'in':
    case 'not_in':
      return {
        kind: 'match',
        negate: f.type === 'not_in',
        field: name,
        column: columnOf(field, cs),
        values: f.value.map((v, i) => comparable(field, v, cs, `${at}.value[${i}]`)),
      }
    case 'wildcard':
      if (field.type !== 'string') throw bad(`${at}.type`, 'wildcard needs a string field')
      return {
        kind: 'wildcard',
        field: name,
        column: cs ? 'value_text' : 'value_lower',
        pattern: cs ? f.value : f.value.toLowerCase(),
      }
    case 'range': {
      if (field.type === 'boolean') throw bad(`${at}.type`, 'range is not allowed on a boolean')
      const bounds = RANGE_OPS.filter((op) => f.value[op] !== undefined).map((op) => ({
        op: OPS[op],
        value: comparable(field, f.value[op] as Scalar, cs, `${at}.value.${op}`),
      }))
      return { kind: 'range', field: name, column: columnOf(field, cs), bounds }
    }
    case 'geo_distance':
      if (field.type !== 'geo_point')
        throw bad(`${at}.type`, 'geo_distance needs a geo_point field')
      return { kind: 'geo', field: name, point: geoPoint(f.value) }
  }
}

/** Resolves the option against the searchable fields (for users: user schema + system fields). */
export function resolveSearch(shape: OptionShape, fields: readonly SchemaField[]): SearchQuery {
  const filters = shape.filters.map((f) =>
    resolveFilter(f, lookup(fields, f.key, `filter.${f.key}`)),
  )
  const sort = shape.sort.map((entry, i): SortKey => {
    const field = lookup(fields, entry.key, `sort[${i}].${entry.key}`)
    const { direction } = entry
    if (field.type === 'geo_point') {
      const geo = filters.find((f) => f.kind === 'geo' && f.field === field.name)
      if (geo?.kind !== 'geo')
        throw bad(`sort[${i}].${entry.key}`, 'needs a geo_distance filter on the same field')
      return { field: field.name, direction, column: 'geo', point: geo.point }
    }
    // Strings by code point; numbers, dates and booleans (0/1) numerically.
    const column = field.type === 'string' ? 'value_text' : 'value_num'
    return { field: field.name, direction, column }
  })
  return {
    filters,
    filterType: shape.filterType,
    page: shape.page,
    perPage: shape.perPage,
    full: shape.full,
    sort,
  }
}
