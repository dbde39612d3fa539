import fc from 'fast-check'
import { haversineKm, nearBoundary, type OracleField } from '../helpers/search-oracle.js'

/**
 * fast-check generators shared by the search property tests (docs/search.md).
 *
 * Domains are kept small so that values collide (equalities, ties, duplicates): per case a few
 * strings and instants are drawn once and reused (see Pools). Strings use a tiny alphabet with
 * both cases, the characters that wildcard-to-GLOB/LIKE translation gets wrong (`*`, `?`, `%`,
 * `_`, `[`) and a few non-ASCII letters; some cases add strings around the 1,000-code-unit cut.
 * Everything stays in the Basic Multilingual Plane.
 *
 * Values of every field type are generated right (in several spellings), wrong (must be ignored),
 * null, missing, in arrays (also nested), and under dotted paths through objects and arrays of
 * objects. Integers include ones past 2^53 (docs/search.md sets no bound).
 *
 * Generators stay away from what docs/search.md leaves open (listed in the oracle's header):
 * numeric strings are plain (`12`, `-3`, `2.5`: no `+`, spaces, exponents, `12.0`), date strings
 * use the listed shapes only (four-digit years, `T`, `±HH:MM`), geo coordinates are JSON numbers,
 * no literal dotted keys in content, field names spelled exactly as in the schema, no field twice
 * in a sort, never both `full_document` and `full_doc`, geo distances ≤ 99.5 (mi or km), and
 * searches with a geo point within 1e-6 km of the filter's circle are skipped (SQL and JavaScript
 * trigonometry may round differently there; see pointsNearCircle).
 */

/**
 * Both cases of two ASCII letters, the pattern characters of GLOB/LIKE, and a few BMP letters
 * whose `toLowerCase()` is not ASCII's (`İ` lowercases to two code units, `Σ` to `σ` or a final
 * `ς`); all sort by code point above ASCII.
 */
export const ALPHABET = ['a', 'A', 'b', 'B', '*', '?', '%', '_', '[', 'é', 'É', 'İ', 'Σ']
const LETTERS = ['a', 'A', 'b', 'B', '%', '_', '[', 'É', 'İ', 'Σ']

export type Kind =
  | 'string'
  | 'integer'
  | 'long'
  | 'float'
  | 'double'
  | 'boolean'
  | 'date'
  | 'geo_point'
const SCALAR_KINDS: Kind[] = ['string', 'integer', 'long', 'float', 'double', 'boolean', 'date']

export interface GenField {
  name: string
  type: Kind
  index: boolean
  /** How the schema spells type/index (omitted, 1/0, "true"/"false"). */
  wire: OracleField
}

export const shortString = fc.string({ unit: fc.constantFrom(...ALPHABET), maxLength: 4 })

// ---------------------------------------------------------------------------------------------
// Dates: four days of 2021 at a few times, written in every accepted shape.

const DAY0 = Date.UTC(2021, 0, 1)
export const dateMs = fc
  .record({
    day: fc.integer({ min: 0, max: 3 }),
    hour: fc.constantFrom(0, 12, 23),
    minute: fc.constantFrom(0, 30),
    second: fc.constantFrom(0, 59),
    ms: fc.constantFrom(0, 0, 250),
  })
  .map(
    (d) =>
      DAY0 + d.day * 86_400_000 + d.hour * 3_600_000 + d.minute * 60_000 + d.second * 1000 + d.ms,
  )

function offsetText(minutes: number): string {
  const sign = minutes < 0 ? '-' : '+'
  const abs = Math.abs(minutes)
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`
}

/** One instant in one of the accepted spellings (`YYYY-MM-DD` keeps only its day). */
export function spellDate(ms: number): fc.Arbitrary<string | number> {
  const iso = new Date(ms).toISOString()
  return fc.oneof(
    fc.constant(iso.slice(0, 10)),
    fc.constant(iso),
    fc.constant(`${iso.slice(0, 19)}Z`),
    fc.constant(iso.slice(0, 19)),
    fc
      .constantFrom(120, -330, 0, 60)
      .map((off) => new Date(ms + off * 60_000).toISOString().slice(0, 19) + offsetText(off)),
    fc.constant(ms),
  )
}

// ---------------------------------------------------------------------------------------------
// Per-case pools: values are mostly drawn from a few strings and instants so that equalities,
// ties and duplicates are common.

export interface Pools {
  strings: string[]
  /**
   * Some cases also use strings around the 1,000-code-unit index cut: one repeated character
   * (999-1,003 times) and a short tail, so that values differ only past the cut.
   */
  long: { char: string; tails: string[] } | undefined
  dates: number[]
  /** Index into CENTRES: where the geo points and geo filters of the case lie. */
  centre: number
}

export const poolsArb: fc.Arbitrary<Pools> = fc.record({
  strings: fc.uniqueArray(shortString, { minLength: 1, maxLength: 5 }),
  long: fc.oneof(
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.record({
        char: fc.constantFrom('a', 'B'),
        tails: fc.uniqueArray(shortString, { minLength: 1, maxLength: 3 }),
      }),
    },
  ),
  dates: fc.uniqueArray(dateMs, { minLength: 1, maxLength: 4 }),
  centre: fc.integer({ min: 0, max: 2 }),
})

export const stringFrom = (pools: Pools): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...pools.strings) },
    { weight: 2, arbitrary: shortString },
  )

/** Document strings: the pools, plus the long ones of the case. */
function documentString(pools: Pools): fc.Arbitrary<string> {
  const long = pools.long
  if (!long) return stringFrom(pools)
  return fc.oneof(
    { weight: 3, arbitrary: stringFrom(pools) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.constantFrom(999, 1000, 1001, 1003), fc.constantFrom(...long.tails))
        .map(([n, tail]) => long.char.repeat(n) + tail),
    },
  )
}

/**
 * Wildcard patterns: random ones, ones derived from the pool strings (characters kept, case
 * swapped, replaced by `?` or `*`, dropped, or `?`/`*` added), and around the 1,000 cut.
 */
export function patternFrom(pools: Pools): fc.Arbitrary<string> {
  const derived = fc.constantFrom(...pools.strings).chain((source) =>
    fc
      .tuple(
        fc.tuple(
          ...source.split('').map((ch) =>
            fc.oneof(
              { weight: 5, arbitrary: fc.constant(ch) },
              {
                weight: 1,
                arbitrary: fc.constant(
                  ch === ch.toLowerCase() ? ch.toUpperCase() : ch.toLowerCase(),
                ),
              },
              { weight: 2, arbitrary: fc.constant('?') },
              { weight: 1, arbitrary: fc.constant('*') },
              { weight: 1, arbitrary: fc.constant('') },
            ),
          ),
        ),
        fc.constantFrom('', '', '', '?', '*'),
        fc.constantFrom('', '', '', '?', '*'),
      )
      .map(([chars, before, after]) => before + chars.join('') + after),
  )
  const arms: fc.WeightedArbitrary<string>[] = [
    { weight: 2, arbitrary: wildcardPattern },
    { weight: 5, arbitrary: derived },
  ]
  const long = pools.long
  if (long)
    arms.push({
      weight: 3,
      arbitrary: fc
        .constantFrom(...long.tails)
        .chain((tail) =>
          fc.constantFrom(
            `*${tail}`,
            `${long.char}*${tail}`,
            `${long.char.repeat(999)}?`,
            `${long.char.repeat(999)}*`,
            `${long.char.repeat(1000)}`,
            `*${long.char}`,
          ),
        ),
    })
  return fc.oneof(...arms)
}

export const instantFrom = (pools: Pools): fc.Arbitrary<number> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...pools.dates) },
    { weight: 1, arbitrary: dateMs },
  )
export const dateFrom = (pools: Pools): fc.Arbitrary<string | number> =>
  instantFrom(pools).chain(spellDate)

const invalidDate = fc.constantFrom('2021-02-30', '2021-13-01', '2021-01-02T25:00:00Z', 'soon', 1.5)

// ---------------------------------------------------------------------------------------------
// Geo: points on a grid around one of a few centres (duplicates give distance ties), one of them
// across the antimeridian and one near a pole.

export const CENTRES = [
  { lat: 40.7128, long: -74.006, step: 0.25, spread: 1 },
  { lat: -33.8688, long: 179.7, step: 0.25, spread: 1 },
  // Near the pole the grid and the filter centres stay below 90° (at the pole every longitude
  // is the same point and distances would tie).
  { lat: 89.2, long: 15, step: 0.1, spread: 0.5 },
]

const wrapLong = (x: number) => (x > 180 ? x - 360 : x < -180 ? x + 360 : x)

export function geoPointArb(centre: number) {
  const c = CENTRES[centre] as (typeof CENTRES)[number]
  return fc
    .tuple(fc.integer({ min: -6, max: 6 }), fc.integer({ min: -6, max: 6 }))
    .map(([i, j]) => ({ lat: c.lat + i * c.step, long: wrapLong(c.long + j * 0.3) }))
}
const badGeo = fc.constantFrom<unknown>(
  { lat: 95, long: 0 },
  { lat: 10, long: 200 },
  { lat: '40.7', long: -74 },
  { lat: 40.7 },
  [40.7, -74],
  'here',
)

// ---------------------------------------------------------------------------------------------
// Values by kind

const quarter = fc.integer({ min: -12, max: 12 }).map((n) => n / 4)
/** Any finite double as JSON carries it (no -0: JSON writes it as 0). */
const anyDouble = fc
  .double({ noNaN: true, noDefaultInfinity: true })
  .map((d) => (Object.is(d, -0) ? 0 : d))

/** Values that coerce to the kind (as document values and as filter values). */
export function goodValue(kind: Kind, pools: Pools): fc.Arbitrary<unknown> {
  switch (kind) {
    case 'string':
      return fc.oneof(
        { weight: 8, arbitrary: documentString(pools) },
        { weight: 1, arbitrary: fc.oneof(fc.integer({ min: -3, max: 3 }), quarter, anyDouble) },
        { weight: 1, arbitrary: fc.boolean() },
      )
    case 'integer':
    case 'long':
      return fc.oneof(
        { weight: 8, arbitrary: fc.integer({ min: -5, max: 5 }) },
        { weight: 2, arbitrary: fc.integer({ min: -5, max: 5 }).map(String) },
        { weight: 1, arbitrary: fc.maxSafeInteger() },
        // Integers past 2^53 (docs/search.md sets no bound: "JSON numbers with no fraction").
        { weight: 1, arbitrary: fc.constantFrom(2 ** 53, -(2 ** 53), 1e20, -1e21) },
      )
    case 'float':
    case 'double':
      return fc.oneof(
        { weight: 8, arbitrary: quarter },
        { weight: 2, arbitrary: quarter.map(String) },
        { weight: 1, arbitrary: anyDouble },
      )
    case 'boolean':
      return fc.oneof(
        { weight: 3, arbitrary: fc.boolean() },
        { weight: 1, arbitrary: fc.constantFrom('true', 'false') },
      )
    case 'date':
      return dateFrom(pools)
    case 'geo_point':
      return geoPointArb(pools.centre)
  }
}

/**
 * Filter values that coerce. Long strings included: the oracle cuts filter values at 1,000 code
 * units like indexed values ("coerced like an indexed value").
 */
export function filterValue(kind: Kind, pools: Pools): fc.Arbitrary<unknown> {
  return goodValue(kind, pools)
}

/** Values that do not coerce to the kind (they must be ignored by the index). */
function wrongValue(kind: Kind): fc.Arbitrary<unknown> {
  const other: fc.Arbitrary<unknown>[] = [
    fc.constant({ x: 1 }),
    shortString.filter((s) => s !== 'true' && s !== 'false'),
  ]
  switch (kind) {
    case 'string':
      return fc.oneof(fc.constant({ x: 1 }), fc.constant([{ y: 'a' }]))
    case 'integer':
    case 'long':
      return fc.oneof(
        ...other,
        quarter.filter((q) => !Number.isInteger(q)),
        fc.boolean(),
        fc.constant('2.5'),
      )
    case 'float':
    case 'double':
      return fc.oneof(...other, fc.boolean(), fc.constant(''), fc.constant('1x'))
    case 'boolean':
      return fc.oneof(...other, fc.constantFrom(1, 0, 'TRUE', 'False'))
    case 'date':
      return fc.oneof(...other, invalidDate, fc.boolean())
    case 'geo_point':
      return fc.oneof(badGeo, fc.integer())
  }
}

/** One leaf as a document holds it: missing, null, good, wrong, an array of those, or long. */
function leafValue(kind: Kind, pools: Pools): fc.Arbitrary<unknown> {
  const good = goodValue(kind, pools)
  const wrong = wrongValue(kind)
  const arms: fc.WeightedArbitrary<unknown>[] = [
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 6, arbitrary: good },
    { weight: 2, arbitrary: wrong },
    {
      weight: 2,
      arbitrary: fc.array(
        fc.oneof(
          { weight: 4, arbitrary: good },
          { weight: 1, arbitrary: wrong },
          { weight: 1, arbitrary: fc.constant(null) },
          { weight: 1, arbitrary: fc.array(good, { maxLength: 2 }) },
        ),
        { maxLength: 3 },
      ),
    },
  ]
  return fc.oneof(...arms)
}

/** The part of a content holding one dotted path: objects, or arrays of objects on the way. */
function pathValue(
  segments: string[],
  leaf: fc.Arbitrary<unknown>,
): fc.Arbitrary<Record<string, unknown>> {
  const [head, ...rest] = segments as [string, ...string[]]
  if (rest.length === 0) return leaf.map((v) => ({ [head]: v }))
  const inner = pathValue(rest, leaf)
  return fc.oneof(
    { weight: 3, arbitrary: inner.map((o) => ({ [head]: o })) },
    {
      weight: 1,
      arbitrary: fc.array(inner, { minLength: 1, maxLength: 2 }).map((os) => ({ [head]: os })),
    },
  )
}

function isPlain(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/** Deep merge of plain objects; on a conflict the first value stays. */
function merge(a: unknown, b: unknown): unknown {
  if (!isPlain(a) || !isPlain(b)) return a === undefined ? b : a
  const out: Record<string, unknown> = { ...a }
  for (const [k, v] of Object.entries(b)) out[k] = k in out ? merge(out[k], v) : v
  return out
}

/** JSON as the server sees it (drops undefined). */
export const normalize = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T

/** A content object for the fields, plus a key no schema knows. */
export function contentArb(
  fields: GenField[],
  pools: Pools,
): fc.Arbitrary<Record<string, unknown>> {
  const parts = fields.map((f) => pathValue(f.name.split('.'), leafValue(f.type, pools)))
  return fc
    .tuple(fc.tuple(...parts), fc.option(shortString, { nil: undefined }))
    .map(([ps, extra]) => {
      let content: unknown = extra === undefined ? {} : { extra }
      for (const p of ps) content = merge(content, p)
      return normalize(content as Record<string, unknown>)
    })
}

// ---------------------------------------------------------------------------------------------
// Schemas

const NAMES = [
  'name',
  'Age',
  'score',
  'flag',
  'born',
  'tags',
  'address.city',
  'address.zip',
  'items.sku',
  'items.qty',
  'a.b.c',
  'été',
]
const GEO_NAMES = ['loc', 'place.pos']

function wireOf(name: string, type: Kind, index: boolean): fc.Arbitrary<GenField> {
  const typeSpelling =
    type === 'string' ? fc.constantFrom<string | undefined>('string', undefined) : fc.constant(type)
  const indexSpelling: fc.Arbitrary<unknown> = index
    ? fc.constantFrom(true, true, 1, 'true', undefined)
    : fc.constantFrom(false, false, 0, 'false')
  return fc.tuple(typeSpelling, indexSpelling).map(([t, i]) => {
    const wire: OracleField = { name }
    if (t !== undefined) wire.type = t
    if (i !== undefined) wire.index = i
    return { name, type, index, wire }
  })
}

const indexArb = (trueWeight: number) =>
  fc.oneof(
    { weight: trueWeight, arbitrary: fc.constant(true) },
    { weight: 1, arbitrary: fc.constant(false) },
  )

/** 1-6 scalar fields (some not indexed) and at most one geo_point field. */
export const fieldsArb: fc.Arbitrary<GenField[]> = fc
  .tuple(
    fc
      .shuffledSubarray(NAMES, { minLength: 1, maxLength: 6 })
      .chain((names) =>
        fc.tuple(
          ...names.map((name) =>
            fc
              .tuple(fc.constantFrom(...SCALAR_KINDS), indexArb(6))
              .chain(([type, index]) => wireOf(name, type, index)),
          ),
        ),
      ),
    fc.option(
      fc
        .tuple(fc.constantFrom(...GEO_NAMES), indexArb(5))
        .chain(([name, index]) => wireOf(name, 'geo_point', index)),
      { nil: undefined },
    ),
    fc.nat(),
  )
  .map(([scalars, geo, at]) => {
    const fields = [...scalars]
    if (geo) fields.splice(at % (fields.length + 1), 0, geo)
    return fields
  })

// ---------------------------------------------------------------------------------------------
// Options

export interface OptionContext {
  /** Every field of the schema (indexed or not). */
  fields: GenField[]
  pools: Pools
  /** Extra searchable fields (user search: `$sys.*`), with the kind their filter values take. */
  system?: { name: string; kind: Kind; values: fc.Arbitrary<unknown> }[]
  /** Names that may be spelled another way (`$sys.x` as `$tv.x`). */
  alias?: (name: string) => fc.Arbitrary<string>
}

interface Searchable {
  name: string
  kind: Kind
  values: fc.Arbitrary<unknown>
  patterns: fc.Arbitrary<string>
}

const wildcardPattern = fc.string({
  unit: fc.constantFrom(...LETTERS, '*', '?', '*'),
  maxLength: 4,
})

/**
 * A filter centre's offset from the data's centre: rarely exactly on the grid (then symmetric
 * points tie on distance, and such searches are mostly skipped, see pointsNearCircle).
 */
const offset = (spread: number) =>
  fc.oneof(
    {
      weight: 9,
      arbitrary: fc
        .integer({ min: -1_000_000, max: 1_000_000 })
        .map((n) => (n / 1e6) * spread + 1e-7 * Math.PI),
    },
    { weight: 1, arbitrary: fc.constant(0) },
  )

function filterArb(f: Searchable, centre: number): fc.Arbitrary<Record<string, unknown>> {
  const cs = fc.option(fc.boolean(), { nil: undefined })
  const withCase = (spec: Record<string, unknown>, c: boolean | undefined) =>
    c === undefined ? spec : { ...spec, case_sensitive: c }
  if (f.kind === 'geo_point') {
    const c = CENTRES[centre] as (typeof CENTRES)[number]
    return fc
      .record({
        dLat: offset(c.spread),
        dLong: offset(1),
        unit: fc.constantFrom('mi', 'km'),
        distance: fc.double({ min: 0.5, max: 99.5, noNaN: true }),
      })
      .map(({ dLat, dLong, unit, distance }) => ({
        type: 'geo_distance',
        value: { lat: c.lat + dLat, long: wrapLong(c.long + dLong), distance, unit },
      }))
  }
  const arms: fc.Arbitrary<Record<string, unknown>>[] = [
    fc
      .tuple(fc.constantFrom('eq', 'not'), f.values, cs)
      .map(([type, value, c]) => withCase({ type, value }, c)),
    fc
      .tuple(
        fc.constantFrom('in', 'not_in'),
        fc.array(f.values, { minLength: 1, maxLength: 4 }),
        cs,
      )
      .map(([type, value, c]) => withCase({ type, value }, c)),
  ]
  if (f.kind === 'string')
    arms.push(
      fc.tuple(f.patterns, cs).map(([value, c]) => withCase({ type: 'wildcard', value }, c)),
    )
  if (f.kind !== 'boolean')
    arms.push(
      fc
        .tuple(
          fc
            .subarray(['gt', 'gte', 'lt', 'lte'], { minLength: 1 })
            .chain((ops) => fc.tuple(...ops.map((op) => f.values.map((v) => [op, v] as const)))),
          cs,
        )
        .map(([bounds, c]) => withCase({ type: 'range', value: Object.fromEntries(bounds) }, c)),
    )
  return fc.oneof(...arms)
}

/** What an option may get wrong on purpose (the engine must answer 400 naming the part). */
export type Mistake =
  | 'unindexed-filter'
  | 'unknown-filter'
  | 'unindexed-sort'
  | 'wildcard-non-string'
  | 'range-boolean'
  | 'geo-sort-without-filter'
  | 'window'
  | 'unknown-key'
  | 'bad-filter-type'
  | 'bad-geo'
  | 'bad-sort-direction'
  | 'bad-paging'
  | 'empty-in'
  | 'uncoercible'
  | 'bad-case-sensitive'
  | 'empty-filter'
  | 'not-geo-on-geo'

export function optionArb(ctx: OptionContext): fc.Arbitrary<Record<string, unknown>> {
  const searchable: Searchable[] = [
    ...ctx.fields
      .filter((f) => f.index)
      .map((f) => ({
        name: f.name,
        kind: f.type,
        values: filterValue(f.type, ctx.pools),
        patterns: patternFrom(ctx.pools),
      })),
    ...(ctx.system ?? []).map((s) => ({ ...s, patterns: patternFrom(ctx.pools) })),
  ]
  const spell = (name: string) => (ctx.alias ? ctx.alias(name) : fc.constant(name))
  const plain = searchable.filter((f) => f.kind !== 'geo_point')
  const geo = searchable.find((f) => f.kind === 'geo_point')

  const filtersArb =
    searchable.length === 0
      ? fc.constant([] as [string, Record<string, unknown>][])
      : fc
          .shuffledSubarray(searchable, { minLength: 1, maxLength: Math.min(3, searchable.length) })
          .chain((chosen) =>
            fc.tuple(...chosen.map((f) => fc.tuple(spell(f.name), filterArb(f, ctx.pools.centre)))),
          )

  return filtersArb.chain((filters) => {
    const hasGeoFilter =
      geo !== undefined && filters.some(([, spec]) => spec.type === 'geo_distance')
    const sortable = [...plain, ...(hasGeoFilter && geo ? [geo] : [])]
    const sortArb =
      sortable.length === 0
        ? fc.constant(undefined)
        : fc.option(
            fc
              .shuffledSubarray(sortable, { minLength: 1, maxLength: Math.min(3, sortable.length) })
              .chain((keys) =>
                fc.tuple(
                  ...keys.map((k) =>
                    fc
                      .tuple(spell(k.name), fc.constantFrom('asc', 'desc'))
                      .map(([n, d]) => ({ [n]: d })),
                  ),
                ),
              ),
            { nil: undefined },
          )
    const pagingArb = fc
      .option(fc.constantFrom(1, 2, 3, 5, 7, 100, 500), { nil: undefined })
      .chain((perPage) => {
        const max = Math.min(6, Math.floor(500 / (perPage ?? 100)))
        return fc.tuple(
          fc.constant(perPage),
          fc.option(fc.integer({ min: 1, max }), { nil: undefined }),
        )
      })
    return fc
      .record({
        sort: sortArb,
        paging: pagingArb,
        filterType: fc.option(fc.constantFrom('and', 'or'), { nil: undefined }),
        full: fc.option(
          fc.tuple(fc.constantFrom('full_document', 'full_document', 'full_doc'), fc.boolean()),
          {
            nil: undefined,
          },
        ),
        caseSensitive: fc.option(fc.boolean(), { nil: undefined }),
      })
      .map(({ sort, paging, filterType, full, caseSensitive }) => {
        const option: Record<string, unknown> = { filter: Object.fromEntries(filters) }
        if (filterType !== undefined) option.filter_type = filterType
        if (sort !== undefined) option.sort = sort
        if (paging[0] !== undefined) option.per_page = paging[0]
        if (paging[1] !== undefined) option.page = paging[1]
        if (full !== undefined) option[full[0]] = full[1]
        if (caseSensitive !== undefined) option.case_sensitive = caseSensitive
        return option
      })
  })
}

/** Applies a deliberate mistake where the schema allows it (else returns the option as is). */
export function withMistake(
  option: Record<string, unknown>,
  mistake: Mistake,
  fields: GenField[],
): Record<string, unknown> {
  const o: Record<string, unknown> = {
    ...option,
    filter: { ...(option.filter as Record<string, unknown>) },
  }
  const filter = o.filter as Record<string, unknown>
  const unindexed = fields.find((f) => !f.index)
  const ofKind = (pred: (k: Kind) => boolean) => fields.find((f) => f.index && pred(f.type))
  switch (mistake) {
    case 'unindexed-filter':
      if (unindexed) filter[unindexed.name] = { type: 'eq', value: 'a' }
      break
    case 'unknown-filter':
      filter.nowhere = { type: 'eq', value: 'a' }
      break
    case 'unindexed-sort':
      if (unindexed) o.sort = [...((o.sort as unknown[]) ?? []), { [unindexed.name]: 'asc' }]
      break
    case 'wildcard-non-string': {
      const f = ofKind((k) => k !== 'string')
      if (f) filter[f.name] = { type: 'wildcard', value: 'a*' }
      break
    }
    case 'range-boolean': {
      const f = ofKind((k) => k === 'boolean')
      if (f) filter[f.name] = { type: 'range', value: { gte: false } }
      break
    }
    case 'geo-sort-without-filter': {
      const f = ofKind((k) => k === 'geo_point')
      if (f && !(Object.keys(filter).length === 1 && f.name in filter)) {
        delete filter[f.name]
        o.sort = [{ [f.name]: 'asc' }]
      }
      break
    }
    case 'window':
      o.page = 2
      o.per_page = 300
      break
    case 'unknown-key':
      o.bogus = true
      break
    case 'bad-filter-type': {
      const f = ofKind((k) => k !== 'geo_point')
      if (f) filter[f.name] = { type: 'regex', value: 'a' }
      break
    }
    case 'bad-geo': {
      const f = ofKind((k) => k === 'geo_point')
      if (f)
        filter[f.name] = {
          type: 'geo_distance',
          value: [
            { lat: 0, long: 0, distance: 100.5, unit: 'mi' },
            { lat: 0, long: 0, distance: 0, unit: 'km' },
            { lat: 91, long: 0, distance: 1, unit: 'km' },
            { lat: 0, long: 0, distance: 1, unit: 'm' },
            { lat: 0, long: 0, distance: 1 },
          ][Object.keys(filter).length % 5],
        }
      break
    }
    case 'bad-sort-direction': {
      const f = ofKind((k) => k !== 'geo_point')
      if (f) o.sort = [{ [f.name]: 'up' }]
      break
    }
    case 'bad-paging':
      if (Object.keys(filter).length % 2 === 0) o.page = 0
      else o.per_page = 501
      break
    case 'empty-in': {
      const f = ofKind((k) => k !== 'geo_point')
      if (f) filter[f.name] = { type: 'not_in', value: [] }
      break
    }
    case 'uncoercible': {
      const f = ofKind((k) => k !== 'geo_point' && k !== 'string')
      const bad: Partial<Record<Kind, unknown>> = {
        integer: 'x',
        long: 2.5,
        float: 'x',
        double: '',
        boolean: 'maybe',
        date: '2021-02-30',
      }
      if (f) filter[f.name] = { type: 'eq', value: bad[f.type] }
      break
    }
    case 'bad-case-sensitive':
      o.case_sensitive = 'no'
      break
    case 'empty-filter':
      o.filter = {}
      break
    case 'not-geo-on-geo': {
      const f = ofKind((k) => k === 'geo_point')
      if (f) filter[f.name] = { type: 'eq', value: 1 }
      break
    }
  }
  return o
}

/** Mostly no mistake; one option in six is wrong on purpose. */
export const mistakeArb: fc.Arbitrary<Mistake | undefined> = fc.oneof(
  { weight: 5, arbitrary: fc.constant(undefined) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Mistake>(
      'unindexed-filter',
      'unknown-filter',
      'unindexed-sort',
      'wildcard-non-string',
      'range-boolean',
      'geo-sort-without-filter',
      'window',
      'unknown-key',
      'bad-filter-type',
      'bad-geo',
      'bad-sort-direction',
      'bad-paging',
      'empty-in',
      'uncoercible',
      'bad-case-sensitive',
      'empty-filter',
      'not-geo-on-geo',
    ),
  },
)

// ---------------------------------------------------------------------------------------------
// Boundary guard

/** Geo values of the contents under the field (any shape the walk accepts). */
export function pointsNearCircle(
  points: { lat: number; long: number }[],
  option: Record<string, unknown>,
): boolean {
  for (const spec of Object.values(
    option.filter as Record<string, { type: string; value: unknown }>,
  )) {
    if (spec?.type !== 'geo_distance') continue
    const g = spec.value as { lat: number; long: number; distance: number; unit: 'mi' | 'km' }
    if (points.some((p) => nearBoundary(p, g))) return true
    // Distinct points at (nearly) the same distance could tie differently in SQL and JS.
    const ds = [...new Set(points.map((p) => `${p.lat},${p.long}`))].map((k) => {
      const [lat, long] = k.split(',').map(Number) as [number, number]
      return haversineKm({ lat, long }, g)
    })
    ds.sort((a, b) => a - b)
    for (let i = 1; i < ds.length; i++)
      if ((ds[i] as number) - (ds[i - 1] as number) < 1e-9 * Math.max(1, ds[i] as number))
        return true
  }
  return false
}
