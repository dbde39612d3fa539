/** What a child process prints, as one JSON line on stdout, once it is ready. */

export type ServerKind = 'bare' | 'coffer' | 's3' | 'search' | 'consent'

export interface BareServerInfo {
  kind: 'bare'
  port: number
}

export interface CofferServerInfo {
  kind: 'coffer'
  port: number
  dialect: 'sqlite' | 'postgres'
  /** Where BLOB content goes: a directory next to the database, or an S3 bucket. */
  blobStore: 'fs' | 's3'
  accountId: string
  /** The account admin (full access): Basic `<apiKey>:`. */
  adminApiKey: string
  adminUserId: string
  /** A second user with a known password, for the login scenario. */
  loginUser: { id: string; username: string; password: string }
  /** A vault holding `documentCount` small documents (the read and list scenarios). */
  vaultId: string
  documentCount: number
  /** One of those documents. */
  documentId: string
  /** An empty vault for the create scenario, so the read vault keeps its size. */
  writeVaultId: string
}

/** An s3rver child (the S3 BLOB bench): its own process, so its memory is not the server's. */
export interface S3ServerInfo {
  kind: 's3'
  port: number
  bucket: string
}

/** How the search child filled its vault (bench/search-data.ts). */
export interface SearchPopulation {
  documents: number
  indexRows: number
  /** Sealing every document's content with the real keyring (AES-256-GCM, one per document). */
  sealMs: number
  /** Generating documents and their index rows (indexValues), in JavaScript. */
  generateMs: number
  /** The batched INSERTs and their commits. */
  insertMs: number
  /** Everything from the first document to the last commit (plus checkpoint / VACUUM ANALYZE). */
  totalMs: number
  /** Work after the inserts: SQLite WAL checkpoint, or PostgreSQL VACUUM ANALYZE. */
  finishMs: number
  finish: string
}

/** The database's size once populated. */
export interface SearchStorage {
  /** SQLite: the database file plus its WAL; PostgreSQL: every table of the schema, indexes included. */
  totalBytes: number
  /** Table and index sizes, largest first (SQLite dbstat / pg_total_relation_size per index). */
  objects: { name: string; bytes: number }[]
}

/** One SQL statement a search ran, timed on its own and explained (bench/search-data.ts). */
export interface SearchStatement {
  /** estimate: a bounded count that picks the driving set (search.repo.ts). */
  role: 'estimate' | 'count' | 'page'
  ms: number
  sql: string
  plan: string[]
}

export interface SearchPlan {
  key: string
  statements: SearchStatement[]
  /** Indexes the query's plans must name but do not (SearchQueryDef.uses): a failed scenario. */
  missing: string[]
}

/** A Coffer server whose one vault holds `documents` documents under one schema. */
export interface SearchServerInfo {
  kind: 'search'
  port: number
  dialect: 'sqlite' | 'postgres'
  adminApiKey: string
  /** The owner-scoped user's API key (SearchQueryDef.caller 'owner'). */
  ownerApiKey: string
  /** Documents in the second vault of the same account beside the measured one (0: none). */
  secondVaultDocuments: number
  vaultId: string
  schemaId: string
  /** The name of one document (the control query matches it alone). */
  controlName: string
  population: SearchPopulation
  storage: SearchStorage
  plans: SearchPlan[]
}

/** The consent API alone (bench/consent.ts), with one consumer's record already created. */
export interface ConsentServerInfo {
  kind: 'consent'
  port: number
  dialect: 'sqlite' | 'postgres'
  /** GET path (with query) of an existing email consumer's record. */
  readPath: string
  /** Tokens of CONSENT_CONSUMERS records, for the update scenario (spread over many rows). */
  jwts: string[]
}

export type ServerInfo =
  | BareServerInfo
  | CofferServerInfo
  | S3ServerInfo
  | SearchServerInfo
  | ConsentServerInfo

/** s3rver accepts these fixed credentials. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const

/** The children read these from their environment (the parent sets them). */
export const ENV = {
  /** SQLite: the temp dir the parent created (and removes); also the s3rver storage dir. */
  dataDir: 'COFFER_BENCH_DATA_DIR',
  /** PostgreSQL: the server URL, and the fresh schema the parent created (and drops). */
  pgUrl: 'COFFER_BENCH_DATABASE_URL',
  pgSchema: 'COFFER_BENCH_PG_SCHEMA',
  /** Coffer on S3: the endpoint (`http://127.0.0.1:<port>`) and bucket of the s3rver child. */
  s3Endpoint: 'COFFER_BENCH_S3_ENDPOINT',
  s3Bucket: 'COFFER_BENCH_S3_BUCKET',
  /** The search child: how many documents to put in its vault. */
  searchDocuments: 'COFFER_BENCH_SEARCH_DOCUMENTS',
  /** The search child: documents in a second vault beside it (scoping is exercised; 0: none). */
  searchSecondVault: 'COFFER_BENCH_SEARCH_SECOND_VAULT',
  /** The Coffer child: `off` lifts the login limits so every flood request reaches argon2. */
  loginLimits: 'COFFER_BENCH_LOGIN_LIMITS',
  /** The Coffer child: `off` runs it without the audit trail (the audit on/off pair). */
  audit: 'COFFER_BENCH_AUDIT',
  /**
   * SQLite children: `off` keeps the database file in plaintext (the crypt on/off pair); by
   * default it is encrypted with a random file key, as `coffer serve` does.
   */
  sqliteEncryption: 'COFFER_BENCH_SQLITE_ENCRYPTION',
} as const

/** Only the parent sets these for a child: values inherited from the user's shell are dropped. */
export const CHILD_ONLY_ENV: readonly string[] = Object.values(ENV)
