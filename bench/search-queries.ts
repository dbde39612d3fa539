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
  /**
   * The indexes its statements' plans must name, on both databases (docs/search.md, "Indexes
   * and plans"): a plan that stops using one fails the scenario.
   */
  uses: readonly string[] | { sqlite: readonly string[]; postgres: readonly string[] }
  /** Who searches: the admin (reads everything), or the owner-scoped user (`$[Owner=self]`). */
  caller?: 'owner'
}

/**
 * Every OWNED_EVERY-th document is owned by the bench's owner-scoped user (1 %); the others
 * have no owner. That user's group grants R on the vault's Search and on
 * `Document::$[Owner=self]` only.
 */
export const OWNED_EVERY = 100

/** The indexes of migration 0016 (src/store/migrations/0016_search_covering_indexes.ts). */
const TEXT = 'search_index_text_doc'
const LOWER = 'search_index_lower_doc'
const NUM = 'search_index_num_doc'
const GEO = 'search_index_geo_box'
const PROBE = 'search_index_probe'

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
      uses: [TEXT],
    },
    {
      key: 'range',
      label: 'range age 30..40',
      option: { ...base, filter: { age: ageRange } },
      uses: [NUM],
    },
    {
      key: 'wildcard',
      label: 'wildcard name ab*',
      option: { ...base, filter: { name: { type: 'wildcard', value: 'ab*' } } },
      uses: [TEXT],
    },
    {
      key: 'in',
      label: 'in age (10 values)',
      option: {
        ...base,
        filter: { age: { type: 'in', value: [5, 15, 25, 35, 45, 55, 65, 75, 85, 95] } },
      },
      uses: [NUM],
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
      uses: [GEO, PROBE],
    },
    {
      key: 'and',
      label: 'and: eq status + range age 30..40',
      option: {
        ...base,
        filter_type: 'and',
        filter: { status: { type: 'eq', value: 'active' }, age: ageRange },
      },
      // PostgreSQL may hash-join the two sets rather than probe one candidate at a time.
      uses: { sqlite: [TEXT, NUM, PROBE], postgres: [TEXT, NUM] },
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
      uses: [NUM, PROBE],
    },
    {
      key: 'not',
      label: 'not status (9 of 10 values)',
      option: { ...base, filter: { status: { type: 'not', value: 'active' } } },
      // PostgreSQL may probe through search_index_by_doc (account, doc_id) in its anti-join.
      uses: { sqlite: ['documents_by_schema_id', PROBE], postgres: ['documents_by_schema_id'] },
    },
    {
      key: 'not_in',
      label: 'not_in status (2 of 10 values out)',
      option: { ...base, filter: { status: { type: 'not_in', value: ['active', 'closed'] } } },
      // PostgreSQL may probe through search_index_by_doc (account, doc_id) in its anti-join.
      uses: { sqlite: ['documents_by_schema_id', PROBE], postgres: ['documents_by_schema_id'] },
    },
    {
      key: 'sort2',
      label: 'range age 30..40, sort by status asc, age desc',
      option: { ...base, filter: { age: ageRange }, sort: [{ status: 'asc' }, { age: 'desc' }] },
      uses: [NUM, PROBE],
    },
    {
      key: 'ci',
      label: 'eq status, case_sensitive false',
      option: {
        ...base,
        filter: { status: { type: 'eq', value: 'ACTIVE', case_sensitive: false } },
      },
      uses: [LOWER],
    },
    {
      key: 'owner',
      label: 'eq status, owner-scoped caller ($[Owner=self])',
      option: { ...base, filter: { status: { type: 'eq', value: 'active' } } },
      uses: {
        sqlite: ['documents_by_owner_schema', PROBE],
        postgres: ['documents_by_owner_schema'],
      },
      caller: 'owner',
    },
    {
      key: 'control',
      label: 'control: eq name (1 match)',
      option: { ...base, filter: { name: { type: 'eq', value: controlName } } },
      uses: [TEXT],
    },
  ]
}

/** The indexes a query's plans must name on this database. */
export const usesOn = (def: SearchQueryDef, dialect: 'sqlite' | 'postgres'): readonly string[] =>
  Array.isArray(def.uses) ? def.uses : (def.uses as Record<typeof dialect, string[]>)[dialect]

/** The form body of a search request. */
export function searchBody(option: Record<string, unknown>): string {
  const encoded = Buffer.from(JSON.stringify(option)).toString('base64')
  return new URLSearchParams({ search_option: encoded }).toString()
}
