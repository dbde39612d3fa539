import { describe, expect, it } from 'vitest'
import {
  coerce,
  evaluate,
  evaluateUsers,
  fieldValues,
  haversineKm,
  nearBoundary,
  type OracleDoc,
  OracleError,
  type OracleField,
  type OracleUser,
  parseDateText,
  rawValues,
  wildcardRegExp,
} from './search-oracle.js'

/** Pins the oracle's own reading of docs/search.md on hand-written cases. */

const FIELDS: OracleField[] = [
  { name: 'name' },
  { name: 'age', type: 'integer' },
  { name: 'score', type: 'double', index: 1 },
  { name: 'active', type: 'boolean', index: 'true' },
  { name: 'born', type: 'date' },
  { name: 'tags', type: 'string' },
  { name: 'loc', type: 'geo_point' },
  { name: 'address.city', type: 'string' },
  { name: 'secret', type: 'string', index: false },
  { name: 'hidden', index: 0 },
  { name: 'gone', index: 'false' },
]

const NYC = { lat: 40.7128, long: -74.006 }
const NEAR = { lat: 40.73, long: -73.99 }
const LIBERTY = { lat: 40.6892, long: -74.0445 }
const PHILLY = { lat: 39.9526, long: -75.1652 }

const CONTENTS: unknown[] = [
  {
    name: 'Alice',
    age: 30,
    score: 1.5,
    active: true,
    born: '1990-05-01',
    tags: ['a', 'b'],
    loc: NYC,
    address: { city: 'New York' },
    secret: 'x',
  },
  {
    name: 'bob',
    age: 25,
    score: 2.5,
    active: false,
    born: '1995-01-01T12:00:00Z',
    tags: ['b'],
    loc: NEAR,
    address: [{ city: 'Boston' }, { city: 'Austin' }],
  },
  { name: 'Carol', age: 35, active: true, born: '1985-12-31', tags: [], loc: LIBERTY },
  { name: 'dave%_x', age: '40', score: 0, born: 631152000000, loc: PHILLY },
  { name: '50% off [sale]', age: 12.5, active: 'true' },
  { name: 'ALICE', age: 30, active: false },
  {},
  { name: 'a_b', score: -1 },
]
// ids ascend with the position.
const DOCS: OracleDoc[] = CONTENTS.map((content, i) => ({
  id: `id-${String(i).padStart(2, '0')}`,
  owner_id: i < 2 ? 'owner' : null,
  content,
}))
const pos = (ids: string[]) => ids.map((id) => Number(id.slice(3)))

function search(option: Record<string, unknown>, readable?: (d: OracleDoc) => boolean) {
  return evaluate({ fields: FIELDS, docs: DOCS, option, ...(readable ? { readable } : {}) })
}
const found = (option: Record<string, unknown>) => pos(search(option).ids)
const filter1 = (field: string, f: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  found({ filter: { [field]: f }, ...extra })
function error(option: unknown): OracleError {
  try {
    evaluate({ fields: FIELDS, docs: DOCS, option })
  } catch (e) {
    if (e instanceof OracleError) return e
    throw e
  }
  throw new Error('no error')
}

describe('value extraction', () => {
  it('walks dotted paths and every array element', () => {
    expect(rawValues({ a: { b: 1 } }, 'a.b')).toEqual([1])
    expect(rawValues({ a: [{ b: 1 }, { b: [2, [3]] }, { c: 4 }, null] }, 'a.b')).toEqual([1, 2, 3])
    expect(rawValues({ tags: ['x', 'y'] }, 'tags')).toEqual(['x', 'y'])
    expect(rawValues({ a: null }, 'a')).toEqual([])
    expect(rawValues({ a: 'text' }, 'a.b')).toEqual([])
    expect(rawValues({ 'a.b': 1 }, 'a.b')).toEqual([])
    expect(rawValues({}, 'constructor')).toEqual([])
    expect(rawValues({ a: { b: { c: 1 } } }, 'a.b')).toEqual([{ c: 1 }])
  })

  it('coerces per type', () => {
    expect(coerce('string', 'x')).toBe('x')
    expect(coerce('string', 12)).toBe('12')
    expect(coerce('string', 1.5)).toBe('1.5')
    expect(coerce('string', true)).toBe('true')
    expect(coerce('string', { a: 1 })).toBeUndefined()
    expect(coerce('string', 'y'.repeat(1005))).toBe('y'.repeat(1000))

    expect(coerce('integer', 12)).toBe(12)
    expect(coerce('long', '-40')).toBe(-40)
    expect(coerce('integer', 12.5)).toBeUndefined()
    expect(coerce('integer', '12.5')).toBeUndefined()
    expect(coerce('integer', 'x')).toBeUndefined()
    expect(coerce('integer', true)).toBeUndefined()
    // Only safe integers are integers (docs/search.md): larger ones cannot be held exactly.
    expect(coerce('long', 2 ** 53 - 1)).toBe(2 ** 53 - 1)
    expect(coerce('long', 2 ** 53)).toBeUndefined()
    expect(coerce('integer', 1e20)).toBeUndefined()
    expect(coerce('integer', ' 12 ')).toBe(12)
    expect(coerce('integer', '+5')).toBeUndefined()

    expect(coerce('double', 1.25)).toBe(1.25)
    expect(coerce('float', '-2.5')).toBe(-2.5)
    expect(coerce('float', '')).toBeUndefined()
    expect(coerce('float', '1x')).toBeUndefined()
    expect(coerce('float', 'Infinity')).toBeUndefined()
    expect(coerce('double', false)).toBeUndefined()

    expect(coerce('boolean', true)).toBe(true)
    expect(coerce('boolean', 'false')).toBe(false)
    expect(coerce('boolean', 'TRUE')).toBeUndefined()
    expect(coerce('boolean', 1)).toBeUndefined()

    expect(coerce('date', '2021-03-04')).toBe(Date.UTC(2021, 2, 4))
    expect(coerce('date', 1_600_000_000_000)).toBe(1_600_000_000_000)
    expect(coerce('date', 1.5)).toBeUndefined()
    expect(coerce('date', 1e20)).toBeUndefined()
    expect(coerce('date', '1609459200000')).toBeUndefined()
    expect(coerce('date', true)).toBeUndefined()

    expect(coerce('geo_point', { lat: 1, long: 2 })).toEqual({ lat: 1, long: 2 })
    expect(coerce('geo_point', { lat: 91, long: 2 })).toBeUndefined()
    expect(coerce('geo_point', { lat: 1, long: -180.5 })).toBeUndefined()
    expect(coerce('geo_point', { lat: '1', long: 2 })).toBeUndefined()
    expect(coerce('geo_point', { lat: 1 })).toBeUndefined()
    expect(coerce('geo_point', [1, 2])).toBeUndefined()
  })

  it('parses dates in UTC, with offsets, and rejects invalid calendar dates', () => {
    expect(parseDateText('2030-02-28')).toBe(Date.UTC(2030, 1, 28))
    expect(parseDateText('2030-02-31')).toBeUndefined()
    expect(parseDateText('2024-02-29')).toBe(Date.UTC(2024, 1, 29))
    expect(parseDateText('2023-02-29')).toBeUndefined()
    expect(parseDateText('1900-02-29')).toBeUndefined()
    expect(parseDateText('2000-02-29')).toBe(Date.UTC(2000, 1, 29))
    expect(parseDateText('2021-13-01')).toBeUndefined()
    expect(parseDateText('2021-04-31')).toBeUndefined()
    expect(parseDateText('2021-01-02T03:04:05Z')).toBe(Date.UTC(2021, 0, 2, 3, 4, 5))
    expect(parseDateText('2021-01-02T03:04:05.678Z')).toBe(Date.UTC(2021, 0, 2, 3, 4, 5, 678))
    expect(parseDateText('2021-01-02T03:04:05')).toBe(Date.UTC(2021, 0, 2, 3, 4, 5))
    expect(parseDateText('2021-01-02T03:04:05+02:00')).toBe(Date.UTC(2021, 0, 2, 1, 4, 5))
    expect(parseDateText('2021-01-02T03:04:05-05:30')).toBe(Date.UTC(2021, 0, 2, 8, 34, 5))
    expect(parseDateText('2021-01-02T24:00:00Z')).toBeUndefined()
    expect(parseDateText('0050-01-01')).toBe(new Date('0050-01-01T00:00:00Z').getTime())
    expect(parseDateText('yesterday')).toBeUndefined()
    expect(parseDateText('2021-1-2')).toBeUndefined()
  })

  it('reads the values of a field', () => {
    expect(fieldValues('integer', { n: [1, '2', 2.5, 'x', null] }, 'n')).toEqual([1, 2])
    expect(fieldValues('string', { s: [1, true, 'a', { b: 1 }] }, 's')).toEqual(['1', 'true', 'a'])
  })
})

describe('wildcards and distances', () => {
  it('builds anchored patterns with every other character literal', () => {
    const m = (p: string, s: string) => wildcardRegExp(p).test(s)
    expect(m('a*', 'abc')).toBe(true)
    expect(m('a*', 'a')).toBe(true)
    expect(m('a*', 'ba')).toBe(false)
    expect(m('?b', 'ab')).toBe(true)
    expect(m('?b', 'b')).toBe(false)
    expect(m('?b', 'aab')).toBe(false)
    expect(m('%', 'x')).toBe(false)
    expect(m('%', '%')).toBe(true)
    expect(m('_', 'x')).toBe(false)
    expect(m('[a]', 'a')).toBe(false)
    expect(m('[a]', '[a]')).toBe(true)
    expect(m('a.b', 'axb')).toBe(false)
    expect(m('\\*', '\\x')).toBe(true)
    expect(m('*', '')).toBe(true)
    expect(m('', '')).toBe(true)
    expect(m('', 'a')).toBe(false)
    expect(m('a*b', 'a\nb')).toBe(true)
    expect(m('^$', '^$')).toBe(true)
  })

  it('measures great-circle distances on a 6,371.0088 km sphere', () => {
    expect(haversineKm(NYC, NYC)).toBe(0)
    // One degree of latitude: 2πR/360.
    expect(haversineKm({ lat: 0, long: 0 }, { lat: 1, long: 0 })).toBeCloseTo(
      (2 * Math.PI * 6371.0088) / 360,
      9,
    )
    expect(haversineKm(NYC, PHILLY)).toBeGreaterThan(120)
    expect(haversineKm(NYC, PHILLY)).toBeLessThan(135)
    const oneDegree = { lat: 0, long: 0, unit: 'km' as const }
    expect(nearBoundary({ lat: 1, long: 0 }, { ...oneDegree, distance: 111.19508 })).toBe(true)
    expect(nearBoundary({ lat: 1, long: 0 }, { ...oneDegree, distance: 111.195 })).toBe(false)
  })
})

describe('vault search', () => {
  it('eq, case sensitivity and coercion of the filter value', () => {
    expect(filter1('name', { type: 'eq', value: 'alice' })).toEqual([])
    expect(filter1('name', { type: 'eq', value: 'alice', case_sensitive: false })).toEqual([0, 5])
    expect(filter1('name', { type: 'eq', value: 'alice' }, { case_sensitive: false })).toEqual([
      0, 5,
    ])
    expect(
      filter1(
        'name',
        { type: 'eq', value: 'alice', case_sensitive: true },
        { case_sensitive: false },
      ),
    ).toEqual([])
    expect(filter1('age', { type: 'eq', value: 40 })).toEqual([3])
    expect(filter1('age', { type: 'eq', value: '30' })).toEqual([0, 5])
    expect(filter1('active', { type: 'eq', value: true })).toEqual([0, 2, 4])
    expect(filter1('active', { type: 'eq', value: 'false' })).toEqual([1, 5])
    expect(filter1('born', { type: 'eq', value: '1990-01-01' })).toEqual([3])
    expect(filter1('born', { type: 'eq', value: Date.UTC(1990, 4, 1) })).toEqual([0])
    expect(filter1('tags', { type: 'eq', value: 'b' })).toEqual([0, 1])
    expect(filter1('address.city', { type: 'eq', value: 'Austin' })).toEqual([1])
    expect(filter1('score', { type: 'eq', value: 0 })).toEqual([3])
  })

  it('not and not_in match documents without the field', () => {
    expect(filter1('age', { type: 'not', value: 30 })).toEqual([1, 2, 3, 4, 6, 7])
    expect(filter1('tags', { type: 'not', value: 'a' })).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(filter1('name', { type: 'not_in', value: ['Alice', 'bob'] })).toEqual([2, 3, 4, 5, 6, 7])
    expect(
      filter1('name', { type: 'not_in', value: ['ALICE', 'BOB'], case_sensitive: false }),
    ).toEqual([2, 3, 4, 6, 7])
    expect(filter1('age', { type: 'in', value: [25, '35', 99] })).toEqual([1, 2])
  })

  it('wildcards honour case sensitivity and keep % _ [ literal', () => {
    expect(filter1('name', { type: 'wildcard', value: 'a*' })).toEqual([7])
    expect(filter1('name', { type: 'wildcard', value: 'a*', case_sensitive: false })).toEqual([
      0, 5, 7,
    ])
    expect(filter1('name', { type: 'wildcard', value: '?ob' })).toEqual([1])
    expect(filter1('name', { type: 'wildcard', value: '*%*' })).toEqual([3, 4])
    expect(filter1('name', { type: 'wildcard', value: 'a_b' })).toEqual([7])
    expect(filter1('name', { type: 'wildcard', value: '*[sale]' })).toEqual([4])
    expect(filter1('address.city', { type: 'wildcard', value: '*o*' })).toEqual([0, 1])
  })

  it('ranges need one value satisfying every bound', () => {
    expect(filter1('age', { type: 'range', value: { gte: 25, lt: 35 } })).toEqual([0, 1, 5])
    expect(filter1('score', { type: 'range', value: { gt: 0 } })).toEqual([0, 1])
    expect(filter1('name', { type: 'range', value: { gte: 'a', lt: 'c' } })).toEqual([1, 7])
    expect(
      filter1('name', { type: 'range', value: { gte: 'a', lt: 'c' }, case_sensitive: false }),
    ).toEqual([0, 1, 5, 7])
    expect(
      filter1('born', { type: 'range', value: { gte: '1990-01-01', lte: Date.UTC(1995, 0, 1) } }),
    ).toEqual([0, 3])
    // Tags a/b: no single value is both > a and < b.
    expect(filter1('tags', { type: 'range', value: { gt: 'a', lt: 'b' } })).toEqual([])
  })

  it('geo_distance is inclusive haversine in mi or km', () => {
    const km = haversineKm(NYC, NEAR)
    expect(
      filter1('loc', { type: 'geo_distance', value: { ...NYC, distance: 5, unit: 'km' } }),
    ).toEqual([0, 1, 2])
    expect(
      filter1('loc', { type: 'geo_distance', value: { ...NYC, distance: km - 1e-6, unit: 'km' } }),
    ).toEqual([0])
    expect(
      filter1('loc', { type: 'geo_distance', value: { ...NYC, distance: 100, unit: 'mi' } }),
    ).toEqual([0, 1, 2, 3])
  })

  it('combines filters with or (default) and and', () => {
    const filter = { name: { type: 'eq', value: 'bob' }, age: { type: 'eq', value: 30 } }
    expect(found({ filter })).toEqual([0, 1, 5])
    expect(found({ filter, filter_type: 'and' })).toEqual([])
    expect(
      found({
        filter: { active: { type: 'eq', value: false }, age: { type: 'eq', value: 30 } },
        filter_type: 'and',
      }),
    ).toEqual([5])
  })

  it('sorts by min for asc and max for desc, missing values last both ways, then id', () => {
    const all = { filter: { age: { type: 'not', value: -1 } } }
    // 12.5 is no integer: document 4 has no age.
    expect(found({ ...all, sort: [{ age: 'asc' }] })).toEqual([1, 0, 5, 2, 3, 4, 6, 7])
    expect(found({ ...all, sort: [{ age: 'desc' }] })).toEqual([3, 2, 0, 5, 1, 4, 6, 7])
    expect(found({ ...all, sort: [{ name: 'asc' }] })).toEqual([4, 5, 0, 2, 7, 1, 3, 6])
    expect(found({ ...all, sort: [{ active: 'desc' }, { age: 'desc' }] })).toEqual([
      2, 0, 4, 5, 1, 3, 6, 7,
    ])
    // tags [a, b] sorts as a ascending and as b descending.
    expect(found({ ...all, sort: [{ tags: 'asc' }] })).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(found({ ...all, sort: [{ tags: 'desc' }] })).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(found({ ...all, sort: [{ 'address.city': 'desc' }] })).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(found({ ...all, sort: [{ 'address.city': 'asc' }] })).toEqual([1, 0, 2, 3, 4, 5, 6, 7])
    expect(found({ ...all, sort: [{ born: 'asc' }] })).toEqual([2, 3, 0, 1, 4, 5, 6, 7])
    expect(found({ ...all, sort: [{ score: 'desc' }] })).toEqual([1, 0, 3, 7, 2, 4, 5, 6])
  })

  it('geo sorts by distance and reports it in the filter unit', () => {
    const r = search({
      filter: {
        loc: { type: 'geo_distance', value: { ...NYC, distance: 100, unit: 'mi' } },
        name: { type: 'eq', value: 'a_b' },
      },
      sort: [{ loc: 'desc' }],
    })
    expect(pos(r.ids)).toEqual([3, 2, 1, 0, 7])
    expect(r.distances?.[0]).toBeCloseTo(haversineKm(NYC, PHILLY) / 1.609344, 9)
    expect(r.distances?.[3]).toBe(0)
    expect(r.distances?.[4]).toBeUndefined()
    expect(search({ filter: { name: { type: 'eq', value: 'bob' } } }).distances).toBeUndefined()
  })

  it('pages, totals and readable documents', () => {
    const all = { filter: { age: { type: 'not', value: -1 } } }
    const r = search({ ...all, page: 3, per_page: 3 })
    expect(r).toMatchObject({ total: 8, numPages: 3, page: 3, perPage: 3 })
    expect(pos(r.ids)).toEqual([6, 7])
    expect(search({ ...all, page: 5, per_page: 3 }).ids).toEqual([])
    expect(search({ filter: { name: { type: 'eq', value: 'zzz' } } })).toMatchObject({
      total: 0,
      numPages: 0,
      perPage: 100,
      page: 1,
    })
    const mine = search({ ...all, sort: [{ age: 'desc' }] }, (d) => d.owner_id === 'owner')
    expect(mine.total).toBe(2)
    expect(pos(mine.ids)).toEqual([0, 1])
  })

  it('rejects what the contract calls a 400, naming the part', () => {
    const f = { name: { type: 'eq', value: 'x' } }
    expect(error({ filter: { secret: { type: 'eq', value: 'x' } } }).part).toBe('secret')
    expect(error({ filter: { hidden: { type: 'eq', value: 'x' } } }).part).toBe('hidden')
    expect(error({ filter: { gone: { type: 'eq', value: 'x' } } }).part).toBe('gone')
    expect(error({ filter: { nope: { type: 'eq', value: 'x' } } }).part).toBe('nope')
    expect(error({ filter: f, sort: [{ secret: 'asc' }] }).part).toBe('secret')
    expect(error({ filter: {} }).part).toBe('filter')
    expect(error({ filter: f, extra: 1 }).part).toBe('extra')
    expect(error({ filter: f, page: 2, per_page: 300 }).part).toBe('page')
    expect(() => search({ filter: f, page: 2, per_page: 250 })).not.toThrow()
    expect(error({ filter: f, per_page: 501 }).part).toBe('per_page')
    expect(error({ filter: f, filter_type: 'xor' }).part).toBe('filter_type')
    expect(error({ filter: { age: { type: 'wildcard', value: '1*' } } }).part).toBe('age')
    expect(error({ filter: { active: { type: 'range', value: { gt: false } } } }).part).toBe(
      'active',
    )
    expect(error({ filter: { age: { type: 'eq', value: 'x' } } }).part).toBe('age')
    expect(error({ filter: { age: { type: 'eq', value: 1.5 } } }).part).toBe('age')
    expect(error({ filter: { born: { type: 'eq', value: '2030-02-31' } } }).part).toBe('born')
    expect(error({ filter: { loc: { type: 'eq', value: 1 } } }).part).toBe('loc')
    expect(
      error({
        filter: { name: { type: 'geo_distance', value: { ...NYC, distance: 1, unit: 'km' } } },
      }).part,
    ).toBe('name')
    expect(
      error({
        filter: { loc: { type: 'geo_distance', value: { ...NYC, distance: 101, unit: 'mi' } } },
      }).part,
    ).toBe('loc')
    expect(error({ filter: f, sort: [{ loc: 'asc' }] }).part).toBe('loc')
    expect(error({ filter: f, sort: [{ name: 'up' }] }).part).toBe('name')
    expect(error({ filter: f, sort: [{ name: 'asc', age: 'asc' }] }).part).toBe('sort')
    expect(error({ filter: { age: { type: 'in', value: [] } } }).part).toBe('age')
    const loc = (distance: number, unit: string) => ({
      filter: { loc: { type: 'geo_distance', value: { ...NYC, distance, unit } } },
    })
    expect(() => search(loc(100, 'mi'))).not.toThrow()
    expect(() => search(loc(160.9344, 'km'))).not.toThrow()
    expect(error(loc(160.935, 'km')).part).toBe('loc')
    expect(error(loc(0, 'km')).part).toBe('loc')
    expect(error(loc(1, 'm')).part).toBe('loc')
    expect(error({ filter: { name: { type: 'wildcard', value: 'a'.repeat(1001) } } }).part).toBe(
      'name',
    )
  })

  it('lists every independent offending part', () => {
    const e = error({
      filter: { nope: { type: 'eq', value: 1 }, age: { type: 'eq', value: 'x' } },
      sort: [{ secret: 'asc' }],
      per_page: 0,
      extra: true,
    })
    expect(e.parts.sort()).toEqual(['age', 'extra', 'nope', 'per_page', 'secret'])
    expect(
      error({ filter: { name: { type: 'eq', value: 'x' } }, page: 3, per_page: 200 }).parts,
    ).toEqual(['page', 'per_page'])
  })

  it('cuts string filter values at 1,000 code units like indexed values', () => {
    const long = 'x'.repeat(1000)
    const docs: OracleDoc[] = [{ id: 'a', owner_id: null, content: { s: `${long}1` } }]
    const ids = (filter: Record<string, unknown>) =>
      evaluate({ fields: [{ name: 's' }], docs, option: { filter: { s: filter } } }).ids
    expect(ids({ type: 'eq', value: `${long}2` })).toEqual(['a'])
    expect(ids({ type: 'range', value: { gt: long } })).toEqual([])
    expect(ids({ type: 'wildcard', value: '*1' })).toEqual([])
    expect(ids({ type: 'wildcard', value: `${'x'.repeat(999)}?` })).toEqual(['a'])
  })

  it('lowercases with toLowerCase(), beyond ASCII too', () => {
    const docs: OracleDoc[] = [
      { id: 'a', owner_id: null, content: { s: 'İa' } },
      { id: 'b', owner_id: null, content: { s: 'ΑΣ' } },
      { id: 'c', owner_id: null, content: { s: 'É' } },
    ]
    const ids = (filter: Record<string, unknown>) =>
      evaluate({
        fields: [{ name: 's' }],
        docs,
        option: { filter: { s: { ...filter, case_sensitive: false } } },
      }).ids
    // 'İ'.toLowerCase() is 'i̇' (two code units): `??a` matches, `?a` does not.
    expect(ids({ type: 'wildcard', value: '??a' })).toEqual(['a'])
    expect(ids({ type: 'wildcard', value: '?a' })).toEqual([])
    expect(ids({ type: 'eq', value: 'ας' })).toEqual(['b'])
    expect(ids({ type: 'eq', value: 'é' })).toEqual(['c'])
    // Sorts compare exact strings by code point: É (U+00C9) < İ (U+0130) < Α (U+0391).
    const sorted = evaluate({
      fields: [{ name: 's' }],
      docs,
      option: { filter: { s: { type: 'not', value: 'z' } }, sort: [{ s: 'asc' }] },
    }).ids
    expect(sorted).toEqual(['c', 'a', 'b'])
  })
})

describe('user search', () => {
  const USERS: OracleUser[] = [
    {
      id: 'u1',
      username: 'ann',
      status: 'ACTIVATED',
      created_at: '2021-01-01T00:00:00.000Z',
      attributes: { city: 'Oslo' },
    },
    {
      id: 'u2',
      username: 'Ben',
      status: 'LOCKED',
      created_at: '2020-06-01T00:00:00.000Z',
      attributes: {},
    },
    {
      id: 'u3',
      username: 'cy',
      status: 'DEACTIVATED',
      created_at: '2022-01-01T00:00:00.000Z',
      attributes: null,
    },
    {
      id: 'u4',
      username: 'dee',
      status: 'PENDING',
      created_at: Date.UTC(2019, 0, 1),
      attributes: { city: ['Rome', 'Oslo'] },
    },
  ]
  const users = (option: Record<string, unknown>, readable?: (u: OracleUser) => boolean) =>
    evaluateUsers({
      fields: [{ name: 'city' }],
      users: USERS,
      option,
      ...(readable ? { readable } : {}),
    }).ids

  it('searches attributes and $sys / $tv system fields, never null attributes', () => {
    expect(users({ filter: { city: { type: 'eq', value: 'Oslo' } } })).toEqual(['u1', 'u4'])
    expect(users({ filter: { '$sys.username': { type: 'wildcard', value: '*' } } })).toEqual([
      'u1',
      'u2',
      'u4',
    ])
    expect(users({ filter: { '$tv.status': { type: 'eq', value: 'LOCKED' } } })).toEqual(['u2'])
    expect(
      users({ filter: { '$sys.created_at': { type: 'range', value: { lt: '2021-01-01' } } } }),
    ).toEqual(['u2', 'u4'])
    expect(
      users({
        filter: { '$sys.id': { type: 'not', value: 'zz' } },
        sort: [{ '$tv.created_at': 'desc' }],
      }),
    ).toEqual(['u1', 'u2', 'u4'])
    expect(
      users({ filter: { '$sys.username': { type: 'eq', value: 'ben', case_sensitive: false } } }),
    ).toEqual(['u2'])
    expect(
      users({ filter: { '$sys.id': { type: 'not', value: 'zz' } } }, (u) => u.id !== 'u1'),
    ).toEqual(['u2', 'u4'])
  })
})
