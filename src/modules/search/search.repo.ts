import { expressionBuilder, PostgresAdapter, type RawBuilder, type Selectable, sql } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { QueryBound } from '../../store/bounded-query.js'
import { type BoundedReads, runOnConnection } from '../../store/bounded-reads.js'
import type { Executor } from '../../store/executor.js'
import type { Database, DocumentsTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'
import {
  compileFilters,
  type Dialect,
  orderBySql,
  type SetContext,
  sortKeySql,
} from './search-compiler.js'
import type { SearchQuery } from './search-fields.js'

/** The index row every searchable user has (users with JSON null attributes have none). */
export const USER_MARKER_FIELD = '$sys.id'

/** A row of the documents table: the search reads its hits' columns directly. */
type DocumentRow = Selectable<DocumentsTable>

/** With full_document every column of the row; else only the ones named here. */
export type DocumentHit = Pick<DocumentRow, 'account_id' | 'vault_id' | 'id' | 'owner_id'> &
  Partial<DocumentRow> & {
    /** Sort keys k0, k1, … in order (a geo key in km). */
    keys: unknown[]
  }

export interface UserHit {
  account_id: string
  id: string
  username: string
  status: string
  attributes?: string
  keys: unknown[]
}

export interface Page<T> {
  total: number
  hits: T[]
}

/** Where the compiled queries run (store/bounded-reads.ts). */
type SearchReads = Pick<BoundedReads, 'run'>

/** Without a BoundedReads (tools, tests of the SQL): on `db` itself. */
const inlineReads = (db: Executor): SearchReads => ({
  run: (queries, bound) => runOnConnection(db, queries, bound),
})

const dialectOf = (db: Executor): Dialect =>
  db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite'

interface Target {
  /** `documents d` or `users u`. */
  table: RawBuilder<unknown>
  columns: RawBuilder<unknown>
  idRef: string
  /** Which rows of the table are searched and readable. */
  where: RawBuilder<unknown>
  /** The doc_ids to drive from when no filter can (absent: scan the table's searched rows). */
  everything?: RawBuilder<unknown>
}

/** Counts every match, then reads one sorted page of them. */
async function run(
  db: Executor,
  reads: SearchReads,
  bound: QueryBound | undefined,
  ctx: SetContext,
  query: SearchQuery,
  target: Target,
): Promise<{ total: number; rows: Record<string, unknown>[] }> {
  const id = sql.ref(target.idRef)
  const filters = compileFilters(query, ctx, target.idRef)
  const driver = filters.driver ?? target.everything
  // CROSS JOIN keeps the driving set in the outer loop on SQLite (whose planner has no
  // statistics); PostgreSQL plans it as any inner join.
  const from = driver ? sql`(${driver}) as m cross join ${target.table}` : target.table
  const where = driver
    ? sql`${target.where} and ${id} = m.doc_id and ${filters.where}`
    : sql`${target.where} and ${filters.where}`
  const keys = query.sort.map(
    (key, i) => sql`${sortKeySql(ctx, key, target.idRef)} as ${sql.ref(`k${i}`)}`,
  )
  const select = sql.join([target.columns, ...keys])
  const offset = (query.page - 1) * query.perPage
  const count = sql<{ n: number | string }>`select count(*) as n from ${from} where ${where}`
  const page = sql<
    Record<string, unknown>
  >`select t.* from (select ${select} from ${from} where ${where}) as t order by ${orderBySql(query.sort)} limit ${query.perPage} offset ${offset}`
  // Compiled here, run where `reads` says (a SQLite worker thread, a bounded PostgreSQL
  // transaction): both in one read transaction, so the total and the page agree.
  const [counted, paged] = await reads.run([count.compile(db), page.compile(db)], bound)
  return { total: Number(counted?.[0]?.n ?? 0), rows: paged ?? [] }
}

const keysOf = (row: Record<string, unknown>, n: number) =>
  Array.from({ length: n }, (_, i) => row[`k${i}`])

/** Vault search: documents of the vault tied to the schema that the scopes admit. */
export async function searchDocuments(
  db: Executor,
  p: {
    accountId: string
    vaultId: string
    schemaId: string
    scopes: readonly ItemScope[]
    query: SearchQuery
    /** Time bound and cancellation (store/bounded-query.ts); absent: unbounded (tools, bench). */
    bound?: QueryBound
    /** Where the queries run, how many at once (store/bounded-reads.ts); absent: inline on db. */
    reads?: SearchReads
  },
): Promise<Page<DocumentHit>> {
  const { accountId, vaultId, schemaId } = p
  const ctx: SetContext = { accountId, schemaId, dialect: dialectOf(db) }
  const eb = expressionBuilder<Database, 'documents'>()
  const { total, rows } = await run(db, p.reads ?? inlineReads(db), p.bound, ctx, p.query, {
    table: sql`documents d`,
    columns: p.query.full
      ? sql`d.account_id, d.vault_id, d.id, d.owner_id, d.schema_id, d.schema_bound, d.content, d.created_at, d.updated_at`
      : sql`d.account_id, d.vault_id, d.id, d.owner_id`,
    idRef: 'd.id',
    where: sql`d.account_id = ${accountId} and d.vault_id = ${vaultId} and d.schema_id = ${schemaId} and ${scopePredicate(eb, p.scopes, 'd.id', 'd.owner_id')}`,
  })
  const hits = rows.map((r) => ({
    ...(r as unknown as Omit<DocumentHit, 'keys'>),
    keys: keysOf(r, p.query.sort.length),
  }))
  return { total, hits }
}

/** User search: the account's users with index rows under the user schema, as the scopes admit. */
export async function searchUsers(
  db: Executor,
  p: {
    accountId: string
    schemaId: string
    scopes: readonly ItemScope[]
    query: SearchQuery
    bound?: QueryBound
    reads?: SearchReads
  },
): Promise<Page<UserHit>> {
  const { accountId, schemaId } = p
  const ctx: SetContext = { accountId, schemaId, dialect: dialectOf(db) }
  const eb = expressionBuilder<Database, 'users'>()
  const { total, rows } = await run(db, p.reads ?? inlineReads(db), p.bound, ctx, p.query, {
    table: sql`users u`,
    columns: p.query.full
      ? sql`u.account_id, u.id, u.username, u.status, u.attributes`
      : sql`u.account_id, u.id, u.username, u.status`,
    idRef: 'u.id',
    where: sql`u.account_id = ${accountId} and ${scopePredicate(eb, p.scopes, 'u.id')} and exists (select 1 from search_index where account_id = ${accountId} and schema_id = ${schemaId} and doc_id = u.id and field = ${USER_MARKER_FIELD})`,
    everything: sql`select doc_id from search_index where account_id = ${accountId} and schema_id = ${schemaId} and field = ${USER_MARKER_FIELD}`,
  })
  const hits = rows.map((r) => ({
    ...(r as unknown as Omit<UserHit, 'keys'>),
    keys: keysOf(r, p.query.sort.length),
  }))
  return { total, hits }
}
