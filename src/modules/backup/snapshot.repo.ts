import { type RawBuilder, sql } from 'kysely'
import type { DialectName, Store } from '../../store/db.js'
import type { Executor } from '../../store/executor.js'

/**
 * The backup's view of the database: every table as rows, read generically (names, columns,
 * primary keys and foreign keys from the catalog), so a table a later migration adds is backed
 * up without a change here. Kysely's own migration tables are not data: a restore recreates
 * them by migrating the target to the backup's schema version.
 */

/** Kysely's bookkeeping, rebuilt by the restore's migrations. */
const NOT_DATA = new Set(['kysely_migration', 'kysely_migration_lock'])

export interface TableInfo {
  name: string
  /** Every column, in the table's order. */
  columns: string[]
  /** The primary key's columns, in key order: rows are read in this order, page by page. */
  primaryKey: string[]
}

/** A value as the drivers hand it back: text, numbers (PostgreSQL's int8 as text), null. */
export type Cell = string | number | null
export type Row = Cell[]

/**
 * Every data table, each after the tables its foreign keys name (a restore inserts in this order:
 * PostgreSQL checks a foreign key at the end of each statement), ties by name.
 */
export async function listTables(db: Executor, dialect: DialectName): Promise<TableInfo[]> {
  const names = (await tableNames(db, dialect)).filter((n) => !NOT_DATA.has(n)).sort()
  const tables = new Map<string, TableInfo & { references: string[] }>()
  for (const name of names) {
    const columns = await columnsOf(db, dialect, name)
    const primaryKey = await primaryKeyOf(db, dialect, name)
    if (primaryKey.length === 0) throw new Error(`table ${name} has no primary key`)
    const references = (await referencesOf(db, dialect, name)).filter(
      (r) => r !== name && names.includes(r),
    )
    tables.set(name, { name, columns, primaryKey, references })
  }
  const ordered: TableInfo[] = []
  const placed = new Set<string>()
  const place = (name: string, path: string[]) => {
    if (placed.has(name)) return
    if (path.includes(name)) throw new Error(`foreign keys form a cycle: ${path.join(' → ')}`)
    const table = tables.get(name) as TableInfo & { references: string[] }
    for (const r of table.references) place(r, [...path, name])
    placed.add(name)
    ordered.push({ name, columns: table.columns, primaryKey: table.primaryKey })
  }
  for (const name of names) place(name, [])
  return ordered
}

async function tableNames(db: Executor, dialect: DialectName): Promise<string[]> {
  const query =
    dialect === 'sqlite'
      ? sql<{ name: string }>`select name from sqlite_master
          where type = 'table' and name not like 'sqlite_%'`
      : // pg_catalog, limited to the store's schema (pg-introspector.ts says why)
        sql<{ name: string }>`select c.relname::text as name from pg_class c
          join pg_namespace s on s.oid = c.relnamespace
          where s.nspname = current_schema() and c.relkind in ('r', 'p')`
  return (await query.execute(db)).rows.map((r) => r.name)
}

async function columnsOf(db: Executor, dialect: DialectName, table: string): Promise<string[]> {
  const query =
    dialect === 'sqlite'
      ? sql<{ name: string }>`select name from pragma_table_info(${table}) order by cid`
      : sql<{ name: string }>`select a.attname::text as name from pg_attribute a
          join pg_class c on c.oid = a.attrelid
          join pg_namespace s on s.oid = c.relnamespace
          where s.nspname = current_schema() and c.relname = ${table}
            and a.attnum > 0 and not a.attisdropped
          order by a.attnum`
  return (await query.execute(db)).rows.map((r) => r.name)
}

async function primaryKeyOf(db: Executor, dialect: DialectName, table: string): Promise<string[]> {
  const query =
    dialect === 'sqlite'
      ? sql<{ name: string }>`select name from pragma_table_info(${table}) where pk > 0 order by pk`
      : sql<{ name: string }>`select a.attname::text as name from pg_index i
          join pg_class c on c.oid = i.indrelid
          join pg_namespace s on s.oid = c.relnamespace
          join pg_attribute a on a.attrelid = c.oid and a.attnum = any(i.indkey)
          where s.nspname = current_schema() and c.relname = ${table} and i.indisprimary
          order by array_position(i.indkey::int2[], a.attnum)`
  return (await query.execute(db)).rows.map((r) => r.name)
}

async function referencesOf(db: Executor, dialect: DialectName, table: string): Promise<string[]> {
  const query =
    dialect === 'sqlite'
      ? sql<{
          name: string
        }>`select distinct "table" as name from pragma_foreign_key_list(${table})`
      : sql<{ name: string }>`select distinct r.relname::text as name from pg_constraint k
          join pg_class c on c.oid = k.conrelid
          join pg_class r on r.oid = k.confrelid
          join pg_namespace s on s.oid = c.relnamespace
          where s.nspname = current_schema() and c.relname = ${table} and k.contype = 'f'`
  return (await query.execute(db)).rows.map((r) => r.name)
}

/** The migrations applied, in order: the schema version a backup records. */
export async function appliedMigrations(db: Executor): Promise<string[]> {
  const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(
    db,
  )
  return rows.rows.map((r) => r.name)
}

export async function countRows(db: Executor, table: string): Promise<number> {
  const rows = await sql<{
    n: number | string
  }>`select count(*) as n from ${sql.table(table)}`.execute(db)
  return Number(rows.rows[0]?.n ?? 0)
}

/** Quoted column names, comma-separated. */
function identifiers(names: readonly string[]): RawBuilder<unknown> {
  return sql.join(names.map((n) => sql.ref(n)))
}

/** The next `limit` rows after `after` (a primary key's values), in primary-key order. */
export async function pageRows(
  db: Executor,
  table: TableInfo,
  after: Row | undefined,
  limit: number,
): Promise<Row[]> {
  const key = identifiers(table.primaryKey)
  const where = after ? sql`where (${key}) > (${sql.join(after)})` : sql``
  const result = await sql<Record<string, Cell>>`select ${identifiers(table.columns)}
    from ${sql.table(table.name)} ${where} order by ${key} limit ${limit}`.execute(db)
  return result.rows.map((row) => table.columns.map((c) => cell(table.name, c, row[c])))
}

/** The row of this primary key as it is now (undefined: deleted). */
export async function currentRow(
  db: Executor,
  table: TableInfo,
  key: Row,
): Promise<Row | undefined> {
  const result = await sql<Record<string, Cell>>`select ${identifiers(table.columns)}
    from ${sql.table(table.name)} where (${identifiers(table.primaryKey)}) = (${sql.join(key)})`.execute(
    db,
  )
  const row = result.rows[0]
  return row && table.columns.map((c) => cell(table.name, c, row[c]))
}

/** Only what the portable column types hold (docs/architecture.md, Data) goes into a backup. */
function cell(table: string, column: string, value: unknown): Cell {
  if (value === null || typeof value === 'string') return value
  if (typeof value === 'number' && Number.isFinite(value)) return value
  if (typeof value === 'bigint') return value.toString()
  throw new Error(`${table}.${column} holds a value a backup cannot carry (${typeof value})`)
}

/** Most bound values per statement: under SQLite's 32,766 and PostgreSQL's 65,535. */
const MAX_PARAMETERS = 30_000

/** Inserts rows (values in `columns` order) in statements of at most MAX_PARAMETERS values. */
export async function insertRows(
  db: Executor,
  table: string,
  columns: readonly string[],
  rows: readonly Row[],
): Promise<void> {
  const perStatement = Math.max(1, Math.floor(MAX_PARAMETERS / Math.max(1, columns.length)))
  for (let i = 0; i < rows.length; i += perStatement) {
    const values = rows.slice(i, i + perStatement).map((r) => sql`(${sql.join(r)})`)
    await sql`insert into ${sql.table(table)} (${identifiers(columns)}) values ${sql.join(values)}`.execute(
      db,
    )
  }
}

/** The first data table holding a row, or undefined when the database holds no data. */
export async function firstNonEmptyTable(
  db: Executor,
  dialect: DialectName,
): Promise<string | undefined> {
  for (const name of (await tableNames(db, dialect)).sort()) {
    if (NOT_DATA.has(name)) continue
    const row = await sql`select 1 as one from ${sql.table(name)} limit 1`.execute(db)
    if (row.rows.length > 0) return name
  }
  return undefined
}

/**
 * Runs `fn` in one read transaction that sees one point in time: on PostgreSQL REPEATABLE READ,
 * READ ONLY (a snapshot taken at the first statement; writers are never blocked); on SQLite a
 * deferred transaction in WAL mode (read only: store/sqlite-write-driver.ts begins it deferred,
 * not IMMEDIATE; the snapshot of its first read; writers go on in the WAL, a checkpoint cannot
 * pass the snapshot until it ends).
 */
export function inSnapshot<T>(store: Store, fn: (db: Executor) => Promise<T>): Promise<T> {
  const begin =
    store.dialect === 'postgres'
      ? store.db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only')
      : store.db.transaction().setAccessMode('read only')
  return begin.execute(fn)
}

/**
 * Runs `fn` in one write transaction whose foreign keys are checked at its commit on SQLite
 * (rows of a self-referencing table may come in any order); PostgreSQL checks each statement,
 * which the table order of `listTables` satisfies.
 */
export function inRestore<T>(store: Store, fn: (db: Executor) => Promise<T>): Promise<T> {
  return store.db.transaction().execute(async (trx) => {
    if (store.dialect === 'sqlite') await sql`pragma defer_foreign_keys = on`.execute(trx)
    return fn(trx)
  })
}

/** A schema of its own on PostgreSQL (verify's scratch); the name is made by the caller. */
export async function createSchema(db: Executor, name: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`bad schema name ${name}`)
  await sql`create schema ${sql.id(name)}`.execute(db)
}

export async function dropSchema(db: Executor, name: string): Promise<void> {
  await sql`drop schema if exists ${sql.id(name)} cascade`.execute(db)
}

/** PostgreSQL: the schema unqualified names resolve to. */
export async function currentSchema(db: Executor): Promise<string | undefined> {
  const rows = await sql<{ s: string | null }>`select current_schema() as s`.execute(db)
  return rows.rows[0]?.s ?? undefined
}
