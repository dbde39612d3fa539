import { type Kysely, PostgresAdapter, sql } from 'kysely'

/**
 * The shard rule (issue 12, point 8; docs/architecture.md, Scaling out), checked against the
 * live schema of either engine: every table is distributed by `account_id` unless it is named
 * here with its reason. A distributed table has its distribution column, its primary key and
 * every unique index lead with it, and each of its foreign keys either points at a reference
 * table or carries the distribution column onto the referenced table's own (so the two rows
 * live on one shard). A reference table's foreign keys point only at reference tables.
 */

export interface TableShape {
  name: string
  columns: string[]
  primaryKey: string[]
  /** Unique indexes and constraints other than the primary key; null for an expression. */
  uniques: { name: string; columns: (string | null)[] }[]
  foreignKeys: { columns: string[]; refTable: string; refColumns: string[] }[]
}

export type Placement =
  | { kind: 'reference'; reason: string }
  | { kind: 'distributed'; column: string; reason: string }

/** Tables not distributed by `account_id`, each with why. Every other table must be. */
export const PLACEMENTS: Record<string, Placement> = {
  accounts: {
    kind: 'distributed',
    column: 'id',
    reason: 'the tenants themselves: their id is every other table’s account_id',
  },
  backup_schedule: {
    kind: 'reference',
    reason: 'one row per backup schedule: which node takes each slot (decisions 238)',
  },
  bootstrap: {
    kind: 'reference',
    reason: 'one row ever ("this database has its first account"), written once at first start',
  },
  credential_directory: {
    kind: 'distributed',
    column: 'digest',
    reason:
      'a presented secret carries no account: its digest is looked up once, routed by digest, ' +
      'to find the account every later query of the request is routed by',
  },
  consent_records: {
    kind: 'distributed',
    column: 'shop',
    reason: 'the consent API belongs to no account: its partition is the shop',
  },
  consent_events: {
    kind: 'distributed',
    column: 'shop',
    reason: 'the consent API belongs to no account: its partition is the shop',
  },
  kysely_migration: {
    kind: 'reference',
    reason: 'Kysely’s record of applied migrations: a few rows, read at start',
  },
  kysely_migration_lock: {
    kind: 'reference',
    reason: 'Kysely’s migration lock: one row',
  },
}

const DEFAULT: Placement = { kind: 'distributed', column: 'account_id', reason: 'tenant table' }

export const placementOf = (table: string): Placement => PLACEMENTS[table] ?? DEFAULT

const list = (columns: readonly (string | null)[]) =>
  `(${columns.map((c) => c ?? '<expression>').join(', ')})`

/** What breaks the rule, one line per problem ("table: what is wrong"); empty when all holds. */
export function shardRuleViolations(tables: readonly TableShape[]): string[] {
  const byName = new Map(tables.map((t) => [t.name, t]))
  const problems: string[] = []
  for (const t of tables) {
    const placement = placementOf(t.name)
    const problem = (text: string) => problems.push(`${t.name}: ${text}`)
    if (placement.kind === 'reference') {
      for (const fk of t.foreignKeys)
        if (placementOf(fk.refTable).kind !== 'reference')
          problem(`reference table with a foreign key to distributed table ${fk.refTable}`)
      continue
    }
    const d = placement.column
    if (!t.columns.includes(d)) problem(`has no ${d} column`)
    if (t.primaryKey.length === 0) problem('has no primary key')
    else if (t.primaryKey[0] !== d)
      problem(`primary key ${list(t.primaryKey)} does not lead with ${d}`)
    for (const u of t.uniques)
      if (u.columns[0] !== d)
        problem(`unique index ${u.name} ${list(u.columns)} does not lead with ${d}`)
    for (const fk of t.foreignKeys) {
      const target = placementOf(fk.refTable)
      if (target.kind === 'reference') continue
      const i = fk.columns.indexOf(d)
      const ref = byName.get(fk.refTable)
      if (i < 0 || (target.kind === 'distributed' && fk.refColumns[i] !== target.column))
        problem(
          `foreign key ${list(fk.columns)} → ${fk.refTable} ${list(fk.refColumns)} does not ` +
            `carry ${d} onto ${fk.refTable}.${target.column}`,
        )
      else if (!ref) problem(`foreign key to missing table ${fk.refTable}`)
    }
  }
  return problems
}

// biome-ignore lint/suspicious/noExplicitAny: reads the catalogue, whatever the schema is
type AnyDb = Kysely<any>

/** Every table of the live schema (SQLite: the file; PostgreSQL: the current schema). */
export async function readSchema(db: AnyDb): Promise<TableShape[]> {
  return db.getExecutor().adapter instanceof PostgresAdapter ? readPostgres(db) : readSqlite(db)
}

async function readSqlite(db: AnyDb): Promise<TableShape[]> {
  const names = await sql<{ name: string }>`select name from sqlite_master
    where type = 'table' and name not like 'sqlite_%' order by name`.execute(db)
  const tables: TableShape[] = []
  for (const { name } of names.rows) {
    const cols = await sql<{ name: string; pk: number }>`select name, pk
      from pragma_table_info(${name}) order by cid`.execute(db)
    const indexes = await sql<{ name: string; unique: number; origin: string }>`select name,
      "unique", origin from pragma_index_list(${name})`.execute(db)
    const uniques: TableShape['uniques'] = []
    for (const ix of indexes.rows) {
      if (!ix.unique || ix.origin === 'pk') continue
      const info = await sql<{ name: string | null }>`select name from pragma_index_info(${ix.name})
        order by seqno`.execute(db)
      uniques.push({ name: ix.name, columns: info.rows.map((r) => r.name) })
    }
    const fks = await sql<{ id: number; table: string; from: string; to: string }>`select id,
      "table", "from", "to" from pragma_foreign_key_list(${name}) order by id, seq`.execute(db)
    const foreignKeys = new Map<number, TableShape['foreignKeys'][number]>()
    for (const fk of fks.rows) {
      const entry = foreignKeys.get(fk.id) ?? { columns: [], refTable: fk.table, refColumns: [] }
      entry.columns.push(fk.from)
      entry.refColumns.push(fk.to)
      foreignKeys.set(fk.id, entry)
    }
    tables.push({
      name,
      columns: cols.rows.map((c) => c.name),
      primaryKey: cols.rows
        .filter((c) => c.pk > 0)
        .sort((a, b) => a.pk - b.pk)
        .map((c) => c.name),
      uniques,
      foreignKeys: [...foreignKeys.values()],
    })
  }
  return tables
}

async function readPostgres(db: AnyDb): Promise<TableShape[]> {
  // pg_catalog, not information_schema: its views evaluate privilege functions on other
  // schemas' rows too, which fail when a concurrent test file drops its schema.
  const names = await sql<{ name: string }>`select c.relname::text as name
    from pg_class c join pg_namespace s on s.oid = c.relnamespace
    where s.nspname = current_schema() and c.relkind in ('r', 'p')
    order by c.relname`.execute(db)
  const tables: TableShape[] = []
  for (const { name } of names.rows) {
    const cols = await sql<{ name: string }>`select a.attname::text as name
      from pg_attribute a
      join pg_class c on c.oid = a.attrelid
      join pg_namespace s on s.oid = c.relnamespace
      where s.nspname = current_schema() and c.relname = ${name}
        and a.attnum > 0 and not a.attisdropped
      order by a.attnum`.execute(db)
    // Key columns in index order; an expression's position (attnum 0) has no name.
    const indexes = await sql<{ name: string; primary: boolean; columns: (string | null)[] }>`
      select i.relname as name, x.indisprimary as primary,
        array(select a.attname::text from unnest(x.indkey) with ordinality as k(attnum, n)
              left join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.attnum
              where k.n <= x.indnkeyatts order by k.n) as columns
      from pg_index x
      join pg_class t on t.oid = x.indrelid
      join pg_class i on i.oid = x.indexrelid
      join pg_namespace s on s.oid = t.relnamespace
      where s.nspname = current_schema() and t.relname = ${name} and x.indisunique
      order by i.relname`.execute(db)
    const fks = await sql<{ columns: string[]; ref_table: string; ref_columns: string[] }>`
      select r.relname as ref_table,
        array(select a.attname::text from unnest(c.conkey) with ordinality as k(attnum, n)
              join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.attnum
              order by k.n) as columns,
        array(select a.attname::text from unnest(c.confkey) with ordinality as k(attnum, n)
              join pg_attribute a on a.attrelid = c.confrelid and a.attnum = k.attnum
              order by k.n) as ref_columns
      from pg_constraint c
      join pg_class t on t.oid = c.conrelid
      join pg_class r on r.oid = c.confrelid
      join pg_namespace s on s.oid = t.relnamespace
      where c.contype = 'f' and s.nspname = current_schema() and t.relname = ${name}
      order by c.conname`.execute(db)
    const primary = indexes.rows.find((ix) => ix.primary)
    tables.push({
      name,
      columns: cols.rows.map((c) => c.name),
      primaryKey: (primary?.columns ?? []) as string[],
      uniques: indexes.rows
        .filter((ix) => !ix.primary)
        .map(({ name, columns }) => ({ name, columns })),
      foreignKeys: fks.rows.map((fk) => ({
        columns: fk.columns,
        refTable: fk.ref_table,
        refColumns: fk.ref_columns,
      })),
    })
  }
  return tables
}
