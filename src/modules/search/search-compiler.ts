import { type RawBuilder, type SqlBool, sql } from 'kysely'
import type { Column, Filter, GeoPoint, SearchQuery, SortKey } from './search-fields.js'

/**
 * Compiles a search (search-fields.ts) to SQL over `search_index`, driven by its indexes
 * (account_id, schema_id, field, <column>): each filter is the set of doc_ids with a matching
 * row; `and` intersects the sets, `or` unites them, and `not`/`not_in` are the searched set
 * minus the matching one (see `compileFilters`). The SQL is the same on SQLite and PostgreSQL
 * but for two small branches: the wildcard's pattern operator (GLOB vs LIKE … ESCAPE, in
 * `wildcardMatch`) and SQLite's INDEXED BY hints (`indexTable`).
 */

export type Dialect = 'sqlite' | 'postgres'

export interface SetContext {
  accountId: string
  /** The schema whose rows are searched (the user schema for user search). */
  schemaId: string
  dialect: Dialect
}

/** Mean Earth radius (IUGG) in km, as docs/search.md fixes it. */
export const EARTH_RADIUS_KM = 6371.0088

const num = (value: number) => sql`cast(${value} as double precision)`
const DEG = Math.PI / 180

/** Degrees to radians as `(x * π) / 180`, the way the contract's reference code computes it. */
const radians = (deg: RawBuilder<unknown>) => sql`(${deg}) * ${num(Math.PI)} / 180`

/**
 * Haversine distance in km from the point to the row's (lat, long), clamped so asin never fails
 * (PostgreSQL raises on an argument above 1).
 */
export function distanceKm(p: GeoPoint, lat: RawBuilder<unknown>, long: RawBuilder<unknown>) {
  const half = (diff: RawBuilder<unknown>) => sql`power(sin(${radians(diff)} / 2), 2)`
  const cosLat = num(Math.cos((p.lat * Math.PI) / 180))
  const h = sql`(${half(sql`${lat} - ${num(p.lat)}`)} + ${cosLat} * cos(${radians(lat)}) * ${half(sql`${long} - ${num(p.long)}`)})`
  return sql<number>`(${num(2 * EARTH_RADIUS_KM)} * asin(sqrt(case when ${h} > 1 then 1 else ${h} end)))`
}

/**
 * A box around the circle (slightly widened): the geo_box index (…, geo_lat, geo_long, doc_id)
 * seeks the latitude range and checks the longitude inside the index, before the haversine.
 */
function boundingBox(p: GeoPoint): RawBuilder<SqlBool> {
  const margin = 1e-6
  const angle = p.km / EARTH_RADIUS_KM
  const dLat = angle / DEG + margin
  const parts = [sql`geo_lat >= ${num(p.lat - dLat)}`, sql`geo_lat <= ${num(p.lat + dLat)}`]
  const ratio = Math.sin(angle) / Math.cos(p.lat * DEG)
  if (Math.abs(p.lat) + dLat < 90 && ratio < 1) {
    const dLong = Math.asin(ratio) / DEG + margin
    // Across the antimeridian the box would wrap: the haversine alone decides there.
    if (p.long - dLong >= -180 && p.long + dLong <= 180) {
      parts.push(sql`geo_long >= ${num(p.long - dLong)}`, sql`geo_long <= ${num(p.long + dLong)}`)
    }
  }
  return sql<SqlBool>`${sql.join(parts, sql` and `)}`
}

/** The smallest string above every string that starts with `prefix`, when easy to make. */
function prefixEnd(prefix: string): string | undefined {
  const last = prefix.charCodeAt(prefix.length - 1)
  // Stay clear of surrogates: code unit order then equals the engines' code point order.
  return last < 0xd7ff ? prefix.slice(0, -1) + String.fromCharCode(last + 1) : undefined
}

/** `*` any run, `?` one character, everything else literal; the prefix range uses the index. */
function wildcardMatch(column: string, pattern: string, dialect: Dialect): RawBuilder<SqlBool> {
  const col = sql.ref(column)
  const first = pattern.search(/[*?]/)
  if (first < 0) return sql<SqlBool>`${col} = ${pattern}`
  const parts: RawBuilder<unknown>[] = []
  const prefix = pattern.slice(0, first)
  if (prefix !== '') {
    parts.push(sql`${col} >= ${prefix}`)
    const end = prefixEnd(prefix)
    if (end !== undefined) parts.push(sql`${col} < ${end}`)
  }
  if (dialect === 'sqlite') {
    // GLOB is case-sensitive; a literal `[` (the only other GLOB metacharacter) is `[[]`.
    parts.push(sql`${col} glob ${pattern.replace(/\[/g, '[[]')}`)
  } else {
    const like = pattern
      .replace(/[\\%_]/g, '\\$&')
      .replace(/\*/g, '%')
      .replace(/\?/g, '_')
    parts.push(sql`${col} like ${like} escape '\\'`)
  }
  return sql<SqlBool>`${sql.join(parts, sql` and `)}`
}

/**
 * `in` over a list bound as ONE parameter (a JSON array on SQLite, an array on PostgreSQL), so
 * the statement's text and its variable count do not depend on the list's length: lists of
 * every length share one cached statement, and no list can reach an engine's variable limit.
 */
function valueList(
  column: Column,
  values: readonly (string | number)[],
  dialect: Dialect,
): RawBuilder<unknown> {
  if (dialect === 'sqlite') return sql`in (select value from json_each(${JSON.stringify(values)}))`
  const type = sql.raw(column === 'value_num' ? 'double precision[]' : 'text[]')
  return sql`= any(cast(${values} as ${type}))`
}

/** The row condition of a filter (for `not`/`not_in`: of the rows to exclude). */
function rowPredicate(f: Filter, dialect: Dialect): RawBuilder<SqlBool> {
  switch (f.kind) {
    case 'match': {
      const col = sql.ref(f.column)
      return f.values.length === 1
        ? sql<SqlBool>`${col} = ${f.values[0]}`
        : sql<SqlBool>`${col} ${valueList(f.column, f.values, dialect)}`
    }
    case 'range':
      return sql<SqlBool>`${sql.join(
        f.bounds.map((b) => sql`${sql.ref(f.column)} ${sql.raw(b.op)} ${b.value}`),
        sql` and `,
      )}`
    case 'wildcard':
      return wildcardMatch(f.column, f.pattern, dialect)
    case 'geo':
      return sql<SqlBool>`${boundingBox(f.point)} and ${distanceKm(f.point, sql.ref('geo_lat'), sql.ref('geo_long'))} <= ${num(f.point.km)}`
  }
}

/** The index rows of the filter's field that satisfy it (for `not`/`not_in`: that it excludes). */
function rowCondition(ctx: SetContext, f: Filter): RawBuilder<SqlBool> {
  return sql<SqlBool>`account_id = ${ctx.accountId} and schema_id = ${ctx.schemaId} and field = ${f.field} and ${rowPredicate(f, ctx.dialect)}`
}

/**
 * The indexes of migration 0016, each ending with doc_id so a filter's set is an index-only
 * range scan: (account, schema, field, value…, doc_id).
 */
const VALUE_INDEX = {
  value_text: 'search_index_text_doc',
  value_lower: 'search_index_lower_doc',
  value_num: 'search_index_num_doc',
  geo: 'search_index_geo_box',
} as const

/** (account, schema, field, doc_id, every value column): one seek checks one candidate. */
export const PROBE_INDEX = 'search_index_probe'

/**
 * `search_index`, on SQLite with the index to use. Without ANALYZE statistics (which nothing
 * gathers by default) SQLite guesses and often scans the whole (account, schema) prefix of the
 * primary key instead, to avoid a sort for DISTINCT or to read the wrong index in an anti-join.
 * PostgreSQL keeps statistics and needs no hint.
 */
function indexTable(ctx: SetContext, index: string): RawBuilder<unknown> {
  return ctx.dialect === 'sqlite'
    ? sql`search_index indexed by ${sql.raw(index)}`
    : sql`search_index`
}

/** The probe index as `w`, walked in (field, doc_id) order to cut a page. */
const walkTable = (ctx: SetContext) =>
  ctx.dialect === 'sqlite'
    ? sql`search_index as w indexed by ${sql.raw(PROBE_INDEX)}`
    : sql`search_index as w`

/** The index that serves a filter's set: the (account, schema, field, value, doc_id) one. */
const valueIndex = (f: Filter) => VALUE_INDEX[f.kind === 'geo' ? 'geo' : f.column]

const negates = (f: Filter) => f.kind === 'match' && f.negate

/** A set of candidate doc_ids a search can be driven from. */
export interface Driver {
  /** SELECT doc_id …: the set, a document possibly repeated (several matching values). */
  rows: RawBuilder<unknown>
  /** The same set without repeats. */
  distinct: RawBuilder<unknown>
  /**
   * For one filter's set: the same set walked in doc_id order through the probe index, with
   * `extra` (conditions on `doc_id`) applied, so a page can be cut without sorting every match.
   */
  walk?: (extra: RawBuilder<SqlBool>) => RawBuilder<unknown>
}

export interface CompiledFilters {
  /**
   * The sets the search may be driven from (it picks the smallest, search.repo.ts): each
   * positive filter of an `and`, or the union of an `or` without negation. Empty: only the
   * searched rows themselves can drive.
   */
  drivers: Driver[]
  /**
   * What a candidate (id at `idRef`) must satisfy when driven from `driver` (absent: from the
   * searched rows), exactly the filters that driver does not already imply.
   */
  where: (driver: Driver | undefined, idRef: string) => RawBuilder<SqlBool>
  /**
   * For `and` with a positive filter: the matching doc_ids as one compound SELECT over the
   * value indexes (`A intersect B … except N …`, set operations without repeats). Counting it
   * costs the sets' sizes, not a seek per candidate: cheaper when every set is broad.
   */
  matches?: RawBuilder<unknown>
  /**
   * With a negation and no positive filter driving (`and` of negations only, `or` with one):
   * the doc_ids of the documents that do NOT match, as a compound SELECT (`and`: N1 ∪ N2 …;
   * `or`: N1 ∩ N2 … − P1 − P2 …), each a subset of the searched documents. The total is the
   * documents' count minus its size: two index-only counts, not a seek per document.
   */
  excluded?: RawBuilder<unknown>
}

/**
 * The filters as candidate driving sets plus per-candidate checks. A check is one seek on the
 * probe index (account, schema, field, doc_id): `exists` for a positive filter, `not exists`
 * for a negation (a document without the field matches `not`). `and`: any positive filter can
 * drive, the others are checks. `or`: the union of the positives drives when there is no
 * negation; with one, every searched row is a candidate, checked by `(… or not exists …)`.
 */
export function compileFilters(query: SearchQuery, ctx: SetContext): CompiledFilters {
  const positive = query.filters.filter((f) => !negates(f))
  const negative = query.filters.filter(negates)
  const rowsOf = (f: Filter) =>
    sql`select doc_id from ${indexTable(ctx, valueIndex(f))} where ${rowCondition(ctx, f)}`
  const distinctOf = (f: Filter) =>
    sql`select distinct doc_id from ${indexTable(ctx, valueIndex(f))} where ${rowCondition(ctx, f)}`
  const has = (f: Filter, idRef: string) =>
    sql<SqlBool>`exists (select 1 from ${indexTable(ctx, PROBE_INDEX)} where ${rowCondition(ctx, f)} and doc_id = ${sql.ref(idRef)})`
  const all = (parts: RawBuilder<SqlBool>[]) =>
    parts.length === 0 ? sql<SqlBool>`1 = 1` : sql<SqlBool>`(${sql.join(parts, sql` and `)})`
  const absent = (idRef: string) => negative.map((f) => sql<SqlBool>`not ${has(f, idRef)}`)

  // One filter means the same under `and` and `or` (the default): it can drive and walk.
  if (query.filterType === 'and' || query.filters.length <= 1) {
    const drivers = new Map<Driver, Filter>()
    for (const f of positive) {
      drivers.set(
        {
          rows: rowsOf(f),
          distinct: distinctOf(f),
          // Aliased: the checks in `extra` name the walked row as w.doc_id.
          walk: (extra) =>
            sql`select distinct w.doc_id from ${walkTable(ctx)} where ${rowCondition(ctx, f)} and ${extra} order by w.doc_id`,
        },
        f,
      )
    }
    // Compound operators group left to right on both engines: ((A ∩ B) − N1) − N2.
    const matches =
      positive.length > 0
        ? sql.join(
            [sql.join(positive.map(rowsOf), sql` intersect `), ...negative.map(rowsOf)],
            sql` except `,
          )
        : undefined
    const excluded =
      positive.length > 0 || negative.length === 0
        ? undefined
        : negative.length === 1
          ? distinctOf(negative[0] as Filter)
          : sql.join(negative.map(rowsOf), sql` union `)
    return {
      ...(matches ? { matches } : {}),
      ...(excluded ? { excluded } : {}),
      drivers: [...drivers.keys()],
      where: (driver, idRef) => {
        const drove = driver && drivers.get(driver)
        const others = positive.filter((f) => f !== drove).map((f) => has(f, idRef))
        return all([...others, ...absent(idRef)])
      },
    }
  }
  // UNION removes duplicates; its operands are plain SELECTs (SQLite allows no parentheses).
  const union: Driver | undefined =
    positive.length > 0 && negative.length === 0
      ? {
          rows: sql.join(positive.map(rowsOf), sql` union all `),
          distinct:
            positive.length === 1
              ? distinctOf(positive[0] as Filter)
              : sql.join(positive.map(rowsOf), sql` union `),
        }
      : undefined
  // Not matching an `or`: no positive and every negated value present, ((N1 ∩ N2) − P1) − P2.
  const excluded =
    negative.length > 0
      ? sql.join(
          [sql.join(negative.map(rowsOf), sql` intersect `), ...positive.map(rowsOf)],
          sql` except `,
        )
      : undefined
  return {
    ...(excluded ? { excluded } : {}),
    drivers: union ? [union] : [],
    where: (driver, idRef) => {
      if (driver) return sql<SqlBool>`1 = 1`
      const any = [...positive.map((f) => has(f, idRef)), ...absent(idRef)]
      return any.length === 0 ? sql<SqlBool>`1 = 1` : sql<SqlBool>`(${sql.join(any, sql` or `)})`
    },
  }
}

/**
 * A sort key of the document (or user) whose id is `idRef`: the smallest value for `asc`, the
 * largest for `desc` (for a geo field: distance in km); NULL when it has none.
 */
export function sortKeySql(ctx: SetContext, key: SortKey, idRef: string): RawBuilder<unknown> {
  const value =
    key.column === 'geo'
      ? distanceKm(key.point, sql.ref('k.geo_lat'), sql.ref('k.geo_long'))
      : sql.ref(`k.${key.column}`)
  const agg = sql.raw(key.direction === 'asc' ? 'min' : 'max')
  // One seek per candidate on the probe index (account, schema, field, doc_id, values…), never a walk
  // of the whole field through a value index (quadratic: security review, finding 2). SQLite,
  // without statistics, is told the index. PostgreSQL would turn a bare min/max into "walk the
  // value index in order until this document's row": the FILTER clause rules that rewrite out.
  if (ctx.dialect === 'sqlite') {
    return sql`(select ${agg}(${value}) from search_index k indexed by search_index_probe where k.account_id = ${ctx.accountId} and k.schema_id = ${ctx.schemaId} and k.field = ${key.field} and k.doc_id = ${sql.ref(idRef)})`
  }
  return sql`(select ${agg}(${value}) filter (where true) from search_index k where k.account_id = ${ctx.accountId} and k.schema_id = ${ctx.schemaId} and k.field = ${key.field} and k.doc_id = ${sql.ref(idRef)})`
}

/**
 * ORDER BY of the sort keys, named by their output aliases `k0…` (bare, so that neither engine
 * computes a key twice: an expression over an alias made SQLite run the key's subquery again
 * for each place it appeared): missing values last both ways, then by id.
 */
export function orderBySql(sort: readonly SortKey[], idRef: string): RawBuilder<unknown> {
  const terms = sort.map((key, i) => sql`${sql.ref(`k${i}`)} ${sql.raw(key.direction)} nulls last`)
  terms.push(sql`${sql.ref(idRef)}`)
  return sql.join(terms)
}
