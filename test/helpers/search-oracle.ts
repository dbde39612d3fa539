/**
 * A deliberately simple, independent in-memory evaluator of docs/search.md: the second
 * implementation the search property tests compare the SQL engine against.
 *
 * It imports nothing from `src/modules/search`: value walking, coercion, date parsing, wildcard
 * matching, haversine and ordering are written here again, straight from the contract, favouring
 * obviousness over speed (every search re-extracts every value of every document).
 *
 * Choices where docs/search.md leaves room (the property generators stay away from them, see
 * the notes in the property tests):
 * - integer/long strings are `-?digits` only; float/double strings are `Number(text)` of a text
 *   that is not blank after trimming;
 * - date strings are `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with `Z`, `±HH:MM` or no
 *   zone (fraction digits past milliseconds are dropped); date numbers must be integers;
 * - geo `lat`/`long` must be JSON numbers;
 * - `case_sensitive: false` lowercases both sides of `eq`/`not`/`in`/`not_in`, `wildcard` and
 *   `range` on string fields; sorts always compare exact strings;
 * - filter values are coerced exactly like indexed values, so string filter values are cut to
 *   1,000 code units too;
 * - a geo sort key uses the nearest point for `asc` and the farthest for `desc`; `distance_from`
 *   is the distance of that same point (`undefined` when the item has no point);
 * - field names in filters and sorts must match a schema field name exactly;
 * - integers (integer, long, date epoch ms) are safe integers (|n| ≤ 2^53 - 1), as
 *   docs/search.md says; larger ones are not indexed;
 * - `100 mi` exactly is allowed, and in km the limit is 100 × 1.609344 = 160.9344;
 * - an option wrong in several independent places lists all of them in OracleError.parts.
 */

export type FieldType =
  | 'string'
  | 'integer'
  | 'long'
  | 'float'
  | 'double'
  | 'boolean'
  | 'date'
  | 'geo_point'

export interface OracleField {
  name: string
  type?: string
  /** `true`/`false`, `1`/`0`, `"true"`/`"false"`; default true. */
  index?: unknown
}

export interface OracleDoc {
  id: string
  owner_id: string | null
  content: unknown
}

export interface OracleUser {
  id: string
  username: string
  status: string
  /** ISO-8601 text or epoch milliseconds. */
  created_at: string | number
  attributes: unknown
}

export interface OracleResult {
  total: number
  numPages: number
  page: number
  perPage: number
  /** The ids of the requested page, in order. */
  ids: string[]
  /** With a geo sort: per id of `ids`, the distance in the geo filter's unit (or undefined). */
  distances?: (number | undefined)[]
}

/**
 * What the engine must answer with a 400 whose message names the offending part. An option may
 * be wrong in several independent places: `parts` lists them all, and naming any one is right.
 */
export class OracleError extends Error {
  readonly parts: string[]
  constructor(parts: string | string[], detail: string) {
    const list = typeof parts === 'string' ? [parts] : parts
    super(`${list.join(', ')}: ${detail}`)
    this.parts = list
  }
  get part(): string {
    return this.parts[0] as string
  }
}

export const EARTH_RADIUS_KM = 6371.0088
export const KM_PER_MILE = 1.609344
const MAX_STRING = 1000
const MAX_WINDOW = 500

type Scalar = string | number | boolean
interface GeoPoint {
  lat: number
  long: number
}
type Value = Scalar | GeoPoint

// ---------------------------------------------------------------------------------------------
// Value extraction and coercion

/** Every raw value at a dotted path; arrays are walked element by element at every step. */
export function rawValues(content: unknown, name: string): unknown[] {
  const out: unknown[] = []
  const walk = (value: unknown, path: string[]) => {
    if (Array.isArray(value)) {
      for (const element of value) walk(element, path)
      return
    }
    if (value === null || value === undefined) return
    if (path.length === 0) {
      out.push(value)
      return
    }
    if (typeof value !== 'object') return
    const [head, ...rest] = path as [string, ...string[]]
    if (!Object.hasOwn(value, head)) return
    walk((value as Record<string, unknown>)[head], rest)
  }
  walk(content, name.split('.'))
  return out
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) {
    const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0
    return leap ? 29 : 28
  }
  return [4, 6, 9, 11].includes(month) ? 30 : 31
}

const DATE_RE =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})?)?$/

/** A date string as epoch milliseconds, or undefined when it is not a valid date. */
export function parseDateText(text: string): number | undefined {
  const m = DATE_RE.exec(text)
  if (!m) return undefined
  const num = (i: number) => (m[i] === undefined ? 0 : Number(m[i]))
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map(num) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  const millis = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'))
  let offsetMinutes = 0
  const zone = m[8]
  if (zone !== undefined && zone !== 'Z') {
    const oh = Number(zone.slice(1, 3))
    const om = Number(zone.slice(4, 6))
    if (oh > 23 || om > 59) return undefined
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om)
  }
  const d = new Date(0)
  d.setUTCFullYear(year, month - 1, day)
  d.setUTCHours(hour, minute, second, millis)
  return d.getTime() - offsetMinutes * 60_000
}

/** A raw value coerced to the field type, or undefined (then it is as if missing). */
export function coerce(type: FieldType, raw: unknown): Value | undefined {
  switch (type) {
    case 'string':
      if (typeof raw === 'string') return raw.slice(0, MAX_STRING)
      if (typeof raw === 'number' || typeof raw === 'boolean')
        return String(raw).slice(0, MAX_STRING)
      return undefined
    case 'integer':
    case 'long':
      if (typeof raw === 'number') return Number.isSafeInteger(raw) ? raw : undefined
      if (typeof raw === 'string' && /^\s*-?\d+\s*$/.test(raw)) {
        const n = Number(raw)
        return Number.isSafeInteger(n) ? n : undefined
      }
      return undefined
    case 'float':
    case 'double':
      if (typeof raw === 'number') return Number.isFinite(raw) ? raw : undefined
      if (typeof raw === 'string' && raw.trim() !== '' && Number.isFinite(Number(raw)))
        return Number(raw)
      return undefined
    case 'boolean':
      if (raw === true || raw === 'true') return true
      if (raw === false || raw === 'false') return false
      return undefined
    case 'date':
      if (typeof raw === 'number') return Number.isSafeInteger(raw) ? raw : undefined
      if (typeof raw === 'string') return parseDateText(raw)
      return undefined
    case 'geo_point': {
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined
      const { lat, long } = raw as Record<string, unknown>
      if (typeof lat !== 'number' || typeof long !== 'number') return undefined
      if (!(lat >= -90 && lat <= 90 && long >= -180 && long <= 180)) return undefined
      return { lat, long }
    }
  }
}

/** The indexed values of one field of a content. */
export function fieldValues(type: FieldType, content: unknown, name: string): Value[] {
  const out: Value[] = []
  for (const raw of rawValues(content, name)) {
    const v = coerce(type, raw)
    if (v !== undefined) out.push(v)
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Geometry and patterns

export function haversineKm(a: GeoPoint, b: GeoPoint): number {
  const rad = (deg: number) => (deg * Math.PI) / 180
  const dLat = rad(b.lat - a.lat)
  const dLong = rad(b.long - a.long)
  const h =
    Math.sin(dLat / 2) ** 2 + Math.cos(rad(a.lat)) * Math.cos(rad(b.lat)) * Math.sin(dLong / 2) ** 2
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(h)))
}

/** `*` = any run, `?` = one UTF-16 code unit, everything else literal; anchored at both ends. */
export function wildcardRegExp(pattern: string): RegExp {
  let source = ''
  for (const ch of pattern.split('')) {
    if (ch === '*') source += '[\\s\\S]*'
    else if (ch === '?') source += '[\\s\\S]'
    else source += `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`
  }
  // No `u` flag: `?` and `.` work on UTF-16 code units.
  return new RegExp(`^${source}$`)
}

// ---------------------------------------------------------------------------------------------
// Options

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
const TYPES: FieldType[] = [
  'string',
  'integer',
  'long',
  'float',
  'double',
  'boolean',
  'date',
  'geo_point',
]

interface Field {
  name: string
  type: FieldType
}

type Test = (values: Value[]) => boolean

interface GeoFilter {
  field: string
  center: GeoPoint
  unitKm: number
}

interface Plan {
  test: Test[]
  and: boolean
  page: number
  perPage: number
  sort: { field: Field; desc: boolean }[]
  geo?: GeoFilter
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v)

/** The searchable fields: indexed schema fields (type default string, index default true). */
export function indexedFields(fields: OracleField[]): Field[] {
  const out: Field[] = []
  for (const f of fields) {
    const type = (f.type ?? 'string') as FieldType
    if (!TYPES.includes(type)) throw new Error(`oracle: bad field type ${f.type}`)
    const index = f.index ?? true
    if (index === true || index === 1 || index === 'true') out.push({ name: f.name, type })
    else if (!(index === false || index === 0 || index === 'false'))
      throw new Error(`oracle: bad index flag ${String(index)}`)
  }
  return out
}

function lower(v: Value): Value {
  return typeof v === 'string' ? v.toLowerCase() : v
}

function compareScalars(a: Scalar, b: Scalar): number {
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b)
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0
  return a < b ? -1 : a > b ? 1 : 0
}

function planOf(fields: Field[], option: unknown, aliasTv: boolean): Plan {
  if (!isObject(option)) throw new OracleError('search_option', 'must be an object')
  // Independent checks all run; every failing part is collected.
  const errors: OracleError[] = []
  const check = <T>(run: () => T): T | undefined => {
    try {
      return run()
    } catch (e) {
      if (!(e instanceof OracleError)) throw e
      errors.push(e)
      return undefined
    }
  }
  for (const key of Object.keys(option))
    check(() => {
      if (!TOP_LEVEL.has(key)) throw new OracleError(key, 'is not a search option')
    })
  const canonical = (name: string) =>
    aliasTv && name.startsWith('$tv.') ? `$sys.${name.slice(4)}` : name
  const fieldOf = (name: string): Field => {
    const found = fields.find((f) => f.name === canonical(name))
    if (!found) throw new OracleError(name, 'is not an indexed field of the schema')
    return found
  }

  let caseDefault = option.case_sensitive ?? true
  if (typeof caseDefault !== 'boolean') {
    check(() => {
      throw new OracleError('case_sensitive', 'must be a boolean')
    })
    caseDefault = true
  }

  const filterType = option.filter_type ?? 'or'
  check(() => {
    if (filterType !== 'and' && filterType !== 'or')
      throw new OracleError('filter_type', 'must be and or or')
  })

  const page = option.page ?? 1
  const perPage = option.per_page ?? 100
  check(() => {
    if (typeof page !== 'number' || !Number.isSafeInteger(page) || page < 1)
      throw new OracleError('page', 'must be an integer ≥ 1')
    if (
      typeof perPage !== 'number' ||
      !Number.isSafeInteger(perPage) ||
      perPage < 1 ||
      perPage > 500
    )
      throw new OracleError('per_page', 'must be an integer 1..500')
    if ((page - 1) * perPage + perPage > MAX_WINDOW)
      throw new OracleError(['page', 'per_page'], 'is past the result window')
  })

  for (const key of ['full_document', 'full_doc'])
    check(() => {
      if (option[key] !== undefined && typeof option[key] !== 'boolean')
        throw new OracleError(key, 'must be a boolean')
    })

  const filter = option.filter
  if (!isObject(filter) || Object.keys(filter).length === 0)
    throw new OracleError(
      ['filter', ...errors.flatMap((e) => e.parts)],
      'must be an object with at least one entry',
    )

  const tests: Test[] = []
  let geo: GeoFilter | undefined
  for (const [name, spec] of Object.entries(filter))
    check(() => {
      const field = fieldOf(name)
      if (!isObject(spec)) throw new OracleError(name, 'filter must be an object')
      const cs = spec.case_sensitive ?? caseDefault
      if (typeof cs !== 'boolean') throw new OracleError(name, 'case_sensitive must be a boolean')
      const fold = field.type === 'string' && !cs
      const target = (raw: unknown): Value => {
        if (raw === null || typeof raw === 'object')
          throw new OracleError(name, 'filter value must be a scalar')
        const v = coerce(field.type, raw)
        if (v === undefined) throw new OracleError(name, `cannot be compared with ${String(raw)}`)
        return fold ? lower(v) : v
      }
      const norm = (v: Value) => (fold ? lower(v) : v)
      const type = spec.type
      if (field.type === 'geo_point' && type !== 'geo_distance')
        throw new OracleError(name, 'a geo_point field takes geo_distance filters only')
      switch (type) {
        case 'eq':
        case 'not': {
          const t = target(spec.value)
          const has = (values: Value[]) => values.some((v) => norm(v) === t)
          tests.push(type === 'eq' ? has : (values) => !has(values))
          break
        }
        case 'in':
        case 'not_in': {
          const list = spec.value
          if (!Array.isArray(list) || list.length === 0 || list.length > 1000)
            throw new OracleError(name, `${type} takes a non-empty array`)
          const targets = list.map(target)
          const has = (values: Value[]) => values.some((v) => targets.includes(norm(v)))
          tests.push(type === 'in' ? has : (values) => !has(values))
          break
        }
        case 'wildcard': {
          if (field.type !== 'string') throw new OracleError(name, 'wildcard needs a string field')
          if (typeof spec.value !== 'string' || spec.value.length > 1000)
            throw new OracleError(name, 'wildcard takes a string')
          const re = wildcardRegExp(fold ? spec.value.toLowerCase() : spec.value)
          tests.push((values) => values.some((v) => re.test(norm(v) as string)))
          break
        }
        case 'range': {
          if (field.type === 'boolean') throw new OracleError(name, 'no range on a boolean field')
          const bounds = spec.value
          if (!isObject(bounds)) throw new OracleError(name, 'range takes an object')
          const ops = Object.keys(bounds)
          if (ops.length === 0 || ops.some((op) => !['gt', 'gte', 'lt', 'lte'].includes(op)))
            throw new OracleError(name, 'range takes gt, gte, lt, lte')
          const checks = ops.map((op) => {
            const b = target(bounds[op]) as Scalar
            return (v: Scalar) => {
              const c = compareScalars(v, b)
              return op === 'gt' ? c > 0 : op === 'gte' ? c >= 0 : op === 'lt' ? c < 0 : c <= 0
            }
          })
          tests.push((values) =>
            values.some((v) => checks.every((check) => check(norm(v) as Scalar))),
          )
          break
        }
        case 'geo_distance': {
          if (field.type !== 'geo_point')
            throw new OracleError(name, 'geo_distance needs a geo_point field')
          const g = spec.value
          if (!isObject(g)) throw new OracleError(name, 'geo_distance takes an object')
          const { lat, long, distance, unit } = g
          if (typeof lat !== 'number' || lat < -90 || lat > 90)
            throw new OracleError(name, 'lat must be in [-90, 90]')
          if (typeof long !== 'number' || long < -180 || long > 180)
            throw new OracleError(name, 'long must be in [-180, 180]')
          if (unit !== 'mi' && unit !== 'km') throw new OracleError(name, 'unit must be mi or km')
          const unitKm = unit === 'mi' ? KM_PER_MILE : 1
          // 100 mi exactly is allowed; in km the same limit is 160.9344 (the page rounds it).
          const limit = unit === 'mi' ? 100 : 100 * KM_PER_MILE
          if (typeof distance !== 'number' || !(distance > 0) || distance > limit)
            throw new OracleError(name, 'distance must be > 0 and ≤ 100 mi')
          const center = { lat, long }
          const maxKm = distance * unitKm
          geo = { field: field.name, center, unitKm }
          tests.push((values) => values.some((p) => haversineKm(p as GeoPoint, center) <= maxKm))
          break
        }
        default:
          throw new OracleError(name, `unknown filter type ${String(type)}`)
      }
    })

  const sort: Plan['sort'] = []
  const sortOption = option.sort
  if (sortOption !== undefined && !Array.isArray(sortOption))
    check(() => {
      throw new OracleError('sort', 'must be an array')
    })
  if (Array.isArray(sortOption))
    for (const entry of sortOption)
      check(() => {
        if (!isObject(entry) || Object.keys(entry).length !== 1)
          throw new OracleError('sort', 'takes one-key objects')
        const [name, dir] = Object.entries(entry)[0] as [string, unknown]
        const field = fieldOf(name)
        if (dir !== 'asc' && dir !== 'desc') throw new OracleError(name, 'sorts asc or desc')
        if (field.type === 'geo_point' && geo?.field !== field.name)
          throw new OracleError(name, 'a geo sort needs a geo_distance filter on the field')
        sort.push({ field, desc: dir === 'desc' })
      })
  if (errors.length > 0)
    throw new OracleError(
      errors.flatMap((e) => e.parts),
      errors.map((e) => e.message).join('; '),
    )
  return {
    test: tests,
    and: filterType === 'and',
    page: page as number,
    perPage: perPage as number,
    sort,
    ...(geo ? { geo } : {}),
  }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

interface Item {
  id: string
  /** Content the field values are read from. */
  values: (field: Field) => Value[]
}

function run(fields: Field[], items: Item[], option: unknown, aliasTv: boolean): OracleResult {
  const plan = planOf(fields, option, aliasTv)
  // Filters are evaluated field by field in the option's order; `fieldOf` already validated.
  const filterFields = Object.keys((option as { filter: Record<string, unknown> }).filter).map(
    (name) =>
      fields.find(
        (f) => f.name === (aliasTv && name.startsWith('$tv.') ? `$sys.${name.slice(4)}` : name),
      ) as Field,
  )
  const matched = items.filter((item) => {
    const results = plan.test.map((test, i) => test(item.values(filterFields[i] as Field)))
    return plan.and ? results.every(Boolean) : results.some(Boolean)
  })

  // Sort key values: the smallest value for asc, the largest for desc (geo: distances in km).
  const keyOf = (item: Item, key: Plan['sort'][number]): Scalar | undefined => {
    let values: Scalar[]
    if (key.field.type === 'geo_point') {
      const center = (plan.geo as GeoFilter).center
      values = item.values(key.field).map((p) => haversineKm(p as GeoPoint, center))
    } else values = item.values(key.field) as Scalar[]
    let best: Scalar | undefined
    for (const v of values) {
      if (best === undefined) best = v
      else {
        const c = compareScalars(v, best)
        if (key.desc ? c > 0 : c < 0) best = v
      }
    }
    return best
  }
  const keyed = matched.map((item) => ({ item, keys: plan.sort.map((k) => keyOf(item, k)) }))
  keyed.sort((a, b) => {
    for (const [i, key] of plan.sort.entries()) {
      const ka = a.keys[i]
      const kb = b.keys[i]
      if (ka === undefined && kb === undefined) continue
      if (ka === undefined) return 1
      if (kb === undefined) return -1
      const c = compareScalars(ka, kb)
      if (c !== 0) return key.desc ? -c : c
    }
    return a.item.id < b.item.id ? -1 : a.item.id > b.item.id ? 1 : 0
  })

  const start = (plan.page - 1) * plan.perPage
  const pageItems = keyed.slice(start, start + plan.perPage)
  const total = matched.length
  const result: OracleResult = {
    total,
    numPages: total === 0 ? 0 : Math.ceil(total / plan.perPage),
    page: plan.page,
    perPage: plan.perPage,
    ids: pageItems.map((k) => k.item.id),
  }
  const geoKey = plan.sort.findIndex((k) => k.field.type === 'geo_point')
  if (geoKey >= 0) {
    const unitKm = (plan.geo as GeoFilter).unitKm
    result.distances = pageItems.map((k) => {
      const km = k.keys[geoKey]
      return km === undefined ? undefined : (km as number) / unitKm
    })
  }
  return result
}

function memo(content: unknown): Item['values'] {
  const cache = new Map<string, Value[]>()
  return (field) => {
    const key = `${field.type}\u0000${field.name}`
    let values = cache.get(key)
    if (!values) {
      values = fieldValues(field.type, content, field.name)
      cache.set(key, values)
    }
    return values
  }
}

/** Vault search over the documents of one schema; `readable` says what the caller may read. */
export function evaluate(input: {
  fields: OracleField[]
  docs: OracleDoc[]
  readable?: (doc: OracleDoc) => boolean
  option: unknown
}): OracleResult {
  const fields = indexedFields(input.fields)
  const visible = input.docs.filter((d) => (input.readable ? input.readable(d) : true))
  const items = visible.map((d) => ({ id: d.id, values: memo(d.content) }))
  return run(fields, items, input.option, false)
}

export const SYSTEM_FIELDS: OracleField[] = [
  { name: '$sys.id', type: 'string' },
  { name: '$sys.username', type: 'string' },
  { name: '$sys.status', type: 'string' },
  { name: '$sys.created_at', type: 'date' },
]

/** User search: the user schema's fields plus `$sys.*` (alias `$tv.*`); null attributes hide. */
export function evaluateUsers(input: {
  fields: OracleField[]
  users: OracleUser[]
  readable?: (user: OracleUser) => boolean
  option: unknown
}): OracleResult {
  const fields = [...indexedFields(input.fields), ...indexedFields(SYSTEM_FIELDS)]
  const items: Item[] = []
  for (const u of input.users) {
    if (u.attributes === null) continue
    if (input.readable && !input.readable(u)) continue
    const attributes = memo(u.attributes)
    const createdAt =
      typeof u.created_at === 'number' ? u.created_at : new Date(u.created_at).getTime()
    const system: Record<string, Value> = {
      '$sys.id': u.id,
      '$sys.username': u.username.slice(0, MAX_STRING),
      '$sys.status': u.status,
      '$sys.created_at': createdAt,
    }
    items.push({
      id: u.id,
      values: (field) => {
        const sys = system[field.name]
        if (field.name.startsWith('$sys.')) return sys === undefined ? [] : [sys]
        return attributes(field)
      },
    })
  }
  return run(fields, items, input.option, true)
}

/** True when the point sits within `epsKm` of the geo filter's circle (tests avoid those). */
export function nearBoundary(
  point: GeoPoint,
  filter: { lat: number; long: number; distance: number; unit: 'mi' | 'km' },
  epsKm = 1e-6,
): boolean {
  const maxKm = filter.distance * (filter.unit === 'mi' ? KM_PER_MILE : 1)
  return Math.abs(haversineKm(point, filter) - maxKm) <= epsKm
}
