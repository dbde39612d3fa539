/**
 * The search bench's data shape and queries, shared by the parent (which sends them over HTTP)
 * and the server child (which generates the documents and EXPLAINs the queries' SQL).
 */

/** The schema every bench document is tied to (as sent to POST /v1/vaults/{v}/schemas). */
export const SEARCH_SCHEMA = {
  name: 'bench-people',
  fields: [
    { name: 'status', type: 'string', index: true },
    { name: 'age', type: 'integer', index: true },
    { name: 'name', type: 'string', index: true },
    { name: 'tags', type: 'string', index: true },
    { name: 'joined', type: 'date', index: true },
    { name: 'loc', type: 'geo_point', index: true },
  ],
} as const

/** ~10 values, uniformly distributed: `eq` on one matches ~N/10 documents. */
export const STATUSES = [
  'active',
  'inactive',
  'pending',
  'suspended',
  'closed',
  'archived',
  'trial',
  'verified',
  'blocked',
  'review',
] as const

export const TAGS = [
  'alpha',
  'beta',
  'gamma',
  'delta',
  'epsilon',
  'zeta',
  'eta',
  'theta',
  'iota',
  'kappa',
  'lambda',
  'mu',
  'nu',
  'xi',
  'omicron',
  'pi',
  'rho',
  'sigma',
  'tau',
  'upsilon',
] as const

/**
 * The centre of the ~300 km x 300 km box the `loc` points are drawn in (uniformly), and of the
 * geo_distance query. A 10 km circle covers π·10²/300² ≈ 0.35 % of the box.
 */
export const GEO_CENTER = { lat: 48.85, long: 2.35 } as const
export const GEO_BOX_KM = 300

/** How the child writes the data (bench/search-data.ts), named here for the report too. */
export const POPULATE = {
  /** Documents per transaction. */
  docsPerTransaction: 5000,
  /** Rows per multi-row INSERT: well under both engines' parameter limits. */
  documentRowsPerInsert: 500,
  indexRowsPerInsert: 1000,
  /** SQLite page cache while populating only (the default makes random index inserts crawl). */
  sqliteCacheMiB: 512,
} as const

export interface SearchQueryDef {
  /** Short, stable key (table rows, plan headings). */
  key: string
  /** What it asks, for the table. */
  label: string
  /** The search option (sent as base64 JSON in the form field `search_option`). */
  option: Record<string, unknown>
}

/**
 * The measured queries, in run order. `controlName` is the name of one generated document: an
 * `eq` on it matches one document at every N (the control: cost that does not depend on N).
 */
export function searchQueries(schemaId: string, controlName: string): SearchQueryDef[] {
  const base = { schema_id: schemaId, per_page: 100, full_document: false }
  const ageRange = { type: 'range', value: { gte: 30, lte: 40 } }
  return [
    {
      key: 'eq',
      label: 'eq status (1 of 10 values)',
      option: { ...base, filter: { status: { type: 'eq', value: 'active' } } },
    },
    {
      key: 'range',
      label: 'range age 30..40',
      option: { ...base, filter: { age: ageRange } },
    },
    {
      key: 'wildcard',
      label: 'wildcard name ab*',
      option: { ...base, filter: { name: { type: 'wildcard', value: 'ab*' } } },
    },
    {
      key: 'in',
      label: 'in age (10 values)',
      option: {
        ...base,
        filter: { age: { type: 'in', value: [5, 15, 25, 35, 45, 55, 65, 75, 85, 95] } },
      },
    },
    {
      key: 'geo',
      label: 'geo_distance 10 km, sort by distance',
      option: {
        ...base,
        filter: {
          loc: { type: 'geo_distance', value: { ...GEO_CENTER, distance: 10, unit: 'km' } },
        },
        sort: [{ loc: 'asc' }],
      },
    },
    {
      key: 'and',
      label: 'and: eq status + range age 30..40',
      option: {
        ...base,
        filter_type: 'and',
        filter: { status: { type: 'eq', value: 'active' }, age: ageRange },
      },
    },
    {
      // Every document is a candidate and carries one string key: sorting costs one index seek
      // per candidate (it was a walk of the whole field per candidate: security review, 2).
      key: 'sort',
      label: 'sort by name (string) over every document',
      option: {
        ...base,
        filter: { age: { type: 'range', value: { gte: 0 } } },
        sort: [{ name: 'asc' }],
      },
    },
    {
      key: 'control',
      label: 'control: eq name (1 match)',
      option: { ...base, filter: { name: { type: 'eq', value: controlName } } },
    },
  ]
}

/** The form body of a search request. */
export function searchBody(option: Record<string, unknown>): string {
  const encoded = Buffer.from(JSON.stringify(option)).toString('base64')
  return new URLSearchParams({ search_option: encoded }).toString()
}
