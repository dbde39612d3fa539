/** What a server child prints, as one JSON line on stdout, once it is listening. */

export type ServerKind = 'bare' | 'coffer'

export interface BareServerInfo {
  kind: 'bare'
  port: number
}

export interface CofferServerInfo {
  kind: 'coffer'
  port: number
  dialect: 'sqlite' | 'postgres'
  accountId: string
  /** The account admin (full access): Basic `<apiKey>:`. */
  adminApiKey: string
  adminUserId: string
  /** A second user with a known password, for the login scenario. */
  loginUser: { id: string; username: string; password: string }
}

export type ServerInfo = BareServerInfo | CofferServerInfo

/** The child reads these from its environment (the parent sets them). */
export const ENV = {
  /** SQLite: the temp dir the parent created (and removes). */
  dataDir: 'COFFER_BENCH_DATA_DIR',
  /** PostgreSQL: the server URL, and the fresh schema the parent created (and drops). */
  pgUrl: 'COFFER_BENCH_DATABASE_URL',
  pgSchema: 'COFFER_BENCH_PG_SCHEMA',
} as const
