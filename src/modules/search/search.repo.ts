import { expressionBuilder, PostgresAdapter, type RawBuilder, type Selectable, sql } from 'kysely'
import type { ItemScope } from '../../policy/index.js'
import type { QueryBound } from '../../store/bounded-query.js'
import { type BoundedReads, runOnConnection } from '../../store/bounded-reads.js'
import type { Executor } from '../../store/executor.js'
import type { Database, DocumentsTable } from '../../store/schema.js'
import { scopePredicate } from '../../store/scope-filter.js'
import {
  type CompiledFilters,
  compileFilters,
  type Dialect,
  type Driver,
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

/** What is left of a bound after `started` (the second round of a search shares the first's). */
function remaining(bound: QueryBound | undefined, started: number): QueryBound | undefined {
  if (!bound) return undefined
  return { ...bound, timeoutMs: Math.max(1, bound.timeoutMs - (Date.now() - started)) }
}

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
  /**
   * When `everything` selects rows of this very table: the condition finding one of them by its
   * primary key beside `id = m.doc_id`. A page driven by it joins back by key alone; repeating
   * `where` there let SQLite (no statistics) look each row up through the scope's index instead,
   * reading every readable row once per driving row (an owner's 1,000 documents: 263 ms).
   */
  selfKey?: RawBuilder<unknown>
  /**
   * The index rows under the schema are exactly the searched rows (a vault's documents, every
   * one readable): a count or a page walk reads the index alone, never the table.
   */
  indexOnly: boolean
  /** A page without a sort may walk the candidates in id order (documents only). */
  walkable: boolean
}

/**
 * How many rows of a candidate set are counted, at most, to pick the smallest set to drive
 * from; a set this large or larger is "broad": a page without a sort is then cut by walking in
 * id order (it fills after a few pages' worth of rows) rather than by sorting every match.
 */
export const ESTIMATE_LIMIT = 10_000

/**
 * The statements of one search, compiled to SQL with parameters (kysely `sql`) and run where
 * `reads` says (a SQLite worker thread, a bounded PostgreSQL transaction) in two rounds: the
 * bounded estimates of the candidate sets (only when there is a choice to make), then the exact
 * count and one page together in one read transaction, so the total and the page agree. Both
 * rounds share the search's one time bound.
 */
async function run(
  db: Executor,
  reads: SearchReads,
  bound: QueryBound | undefined,
  ctx: SetContext,
  query: SearchQuery,
  target: Target,
  broadRows: number,
): Promise<{ total: number; rows: Record<string, unknown>[] }> {
  const started = Date.now()
  const id = sql.ref(target.idRef)
  const plan = compileFilters(query, ctx)

  // Pick the driver: the smallest candidate set. The searched rows compete when the scope may
  // make them few (an owner's documents) or no filter can drive.
  const unsorted = query.sort.length === 0 && target.walkable
  const choose =
    plan.drivers.length > 1 || query.filters.length > 1 || !target.indexOnly || unsorted
  let best: Driver | undefined = plan.drivers[0]
  let bestSize = Number.POSITIVE_INFINITY
  if (choose) {
    const candidates: (Driver | undefined)[] = [...plan.drivers]
    const sets = plan.drivers.map((driver) => driver.rows)
    if (!target.indexOnly || plan.drivers.length === 0) {
      candidates.push(undefined)
      sets.push(target.everything ?? sql`select 1 from ${target.table} where ${target.where}`)
    }
    const estimates = await reads.run(
      sets.map((rows) =>
        sql`select count(*) as n from (${rows} limit ${broadRows}) as e`.compile(db),
      ),
      bound,
    )
    candidates.forEach((candidate, i) => {
      const n = Number(estimates[i]?.[0]?.n ?? 0)
      if (n < bestSize) [best, bestSize] = [candidate, n]
    })
  }
  const driven = best?.distinct ?? target.everything
  const where = plan.where(best, target.idRef)

  // Every candidate set broad: one compound of the sets costs less than a seek per candidate.
  const compound = query.filters.length > 1 && bestSize >= broadRows && target.indexOnly
  const count =
    plan.excluded && target.indexOnly && !best
      ? sql`select (select count(*) from ${target.table} where ${target.where}) - (select count(*) from (${plan.excluded}) as x) as n`
      : compound && plan.matches
        ? sql`select count(*) as n from (${plan.matches}) as m`
        : best && target.indexOnly
          ? sql`select count(*) as n from (${best.distinct}) as m where ${plan.where(best, 'm.doc_id')}`
          : driven
            ? sql`select count(*) as n from (${driven}) as m cross join ${target.table} where ${target.where} and ${id} = m.doc_id and ${where}`
            : sql`select count(*) as n from ${target.table} where ${target.where} and ${where}`

  const offset = (query.page - 1) * query.perPage
  const walk = unsorted && bestSize >= broadRows && (best === undefined || best.walk)
  const page = walk
    ? walkPage(target, plan, best, query.perPage, offset)
    : sortedPage(ctx, query, target, driven, id, where, offset)
  const [counted, paged] = await reads.run(
    [count.compile(db), page.compile(db)],
    remaining(bound, started),
  )
  return { total: Number(counted?.[0]?.n ?? 0), rows: paged ?? [] }
}

/** A page in the search's sort order (or id order), of the driving set joined to the table. */
function sortedPage(
  ctx: SetContext,
  query: SearchQuery,
  target: Target,
  driven: RawBuilder<unknown> | undefined,
  id: RawBuilder<unknown>,
  where: RawBuilder<unknown>,
  offset: number,
): RawBuilder<unknown> {
  // CROSS JOIN keeps the driving set in the outer loop on SQLite (whose planner has no
  // statistics); PostgreSQL plans it as any inner join.
  const from = driven ? sql`(${driven}) as m cross join ${target.table}` : target.table
  const keys = query.sort.map(
    (key, i) => sql`${sortKeySql(ctx, key, target.idRef)} as ${sql.ref(`k${i}`)}`,
  )
  const select = sql.join([target.columns, ...keys])
  const byKey = driven !== undefined && driven === target.everything && target.selfKey
  const rowWhere = byKey
    ? sql`${target.selfKey} and ${id} = m.doc_id and ${where}`
    : driven
      ? sql`${target.where} and ${id} = m.doc_id and ${where}`
      : sql`${target.where} and ${where}`
  return sql`select ${select} from ${from} where ${rowWhere} order by ${orderBySql(query.sort, target.idRef)} limit ${query.perPage} offset ${offset}`
}

/**
 * A page of a broad unsorted search, in id order without sorting every match: the driving
 * filter's index rows walked in doc_id order (the probe index), each checked against the other
 * filters (and the scope, unless every document is readable) until the page is full; or, with
 * no driving filter, the documents walked in id order (documents_by_schema_id).
 */
function walkPage(
  target: Target,
  plan: CompiledFilters,
  driver: Driver | undefined,
  perPage: number,
  offset: number,
): RawBuilder<unknown> {
  const limit = sql`limit ${perPage} offset ${offset}`
  if (!driver?.walk) {
    return sql`select ${target.columns} from ${target.table} where ${target.where} and ${plan.where(undefined, target.idRef)} order by ${sql.ref(target.idRef)} ${limit}`
  }
  const checks = plan.where(driver, 'w.doc_id')
  const readable = target.indexOnly
    ? checks
    : sql`${checks} and exists (select 1 from ${target.table} where ${target.where} and ${sql.ref(target.idRef)} = w.doc_id)`
  return sql`select ${target.columns} from (${driver.walk(sql`${readable}`)} ${limit}) as m cross join ${target.table} where ${target.where} and ${sql.ref(target.idRef)} = m.doc_id order by ${sql.ref(target.idRef)}`
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
    /** ESTIMATE_LIMIT unless given (tests make every set "broad" with 1). */
    broadRows?: number
    /** Where the queries run, how many at once (store/bounded-reads.ts); absent: inline on db. */
    reads?: SearchReads
  },
): Promise<Page<DocumentHit>> {
  const { accountId, vaultId, schemaId } = p
  const ctx: SetContext = { accountId, schemaId, dialect: dialectOf(db) }
  const eb = expressionBuilder<Database, 'documents'>()
  const where = sql`d.account_id = ${accountId} and d.vault_id = ${vaultId} and d.schema_id = ${schemaId} and ${scopePredicate(eb, p.scopes, 'd.id', 'd.owner_id')}`
  const indexOnly = p.scopes.every((s) => s.all)
  const { total, rows } = await run(
    db,
    p.reads ?? inlineReads(db),
    p.bound,
    ctx,
    p.query,
    {
      table: sql`documents d`,
      columns: p.query.full
        ? sql`d.account_id, d.vault_id, d.id, d.owner_id, d.schema_id, d.schema_bound, d.content, d.created_at, d.updated_at`
        : sql`d.account_id, d.vault_id, d.id, d.owner_id`,
      idRef: 'd.id',
      where,
      // A scoped caller's readable documents as their own set: planned alone, SQLite seeks them
      // (documents_by_owner_schema) instead of walking the vault in id order to spare a sort.
      ...(indexOnly
        ? {}
        : {
            everything: sql`select d.id as doc_id from documents d where ${where}`,
            selfKey: sql`d.account_id = ${accountId} and d.vault_id = ${vaultId}`,
          }),
      // Every document of the vault under the schema, and only those, has its rows under the
      // schema (the indexer replaces them in the document's own transaction).
      indexOnly,
      walkable: true,
    },
    p.broadRows ?? ESTIMATE_LIMIT,
  )
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
    broadRows?: number
    /** Where the queries run, how many at once (store/bounded-reads.ts); absent: inline on db. */
    reads?: SearchReads
  },
): Promise<Page<UserHit>> {
  const { accountId, schemaId } = p
  const ctx: SetContext = { accountId, schemaId, dialect: dialectOf(db) }
  const eb = expressionBuilder<Database, 'users'>()
  const { total, rows } = await run(
    db,
    p.reads ?? inlineReads(db),
    p.bound,
    ctx,
    p.query,
    {
      table: sql`users u`,
      columns: p.query.full
        ? sql`u.account_id, u.id, u.username, u.status, u.attributes`
        : sql`u.account_id, u.id, u.username, u.status`,
      idRef: 'u.id',
      where: sql`u.account_id = ${accountId} and ${scopePredicate(eb, p.scopes, 'u.id')} and exists (select 1 from search_index where account_id = ${accountId} and schema_id = ${schemaId} and doc_id = u.id and field = ${USER_MARKER_FIELD})`,
      everything: sql`select doc_id from search_index where account_id = ${accountId} and schema_id = ${schemaId} and field = ${USER_MARKER_FIELD}`,
      indexOnly: false,
      walkable: false,
    },
    p.broadRows ?? ESTIMATE_LIMIT,
  )
  const hits = rows.map((r) => ({
    ...(r as unknown as Omit<UserHit, 'keys'>),
    keys: keysOf(r, p.query.sort.length),
  }))
  return { total, hits }
}
