import {
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type DatabaseMetadataOptions,
  type Dialect,
  type Kysely,
  type SchemaMetadata,
  sql,
  type TableMetadata,
} from 'kysely'
import { wrapDialect } from './pass-through-driver.js'

interface ColumnRow {
  schema: string
  table: string
  table_type: string
  column: string | null
  type: string | null
  type_schema: string | null
  not_null: boolean | null
  has_default: boolean | null
}

/**
 * Kysely's own PostgreSQL introspector lists the tables and columns of *every* schema on the
 * server (and asks `pg_get_serial_sequence` about each column). When another schema changes or is
 * dropped meanwhile (a tenant's teardown, a parallel test file migrating), that listing fails with
 * "column … does not exist" or "schema … does not exist" and our migration start fails with it.
 * The store only ever works in its own schema (the first of the search_path), so this introspector
 * lists that one alone, from pg_catalog, without per-column function calls.
 */
class CurrentSchemaIntrospector implements DatabaseIntrospector {
  // biome-ignore lint/suspicious/noExplicitAny: the introspector runs catalog queries outside the app's table types
  constructor(private readonly db: Kysely<any>) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const rows = await sql<{ name: string }>`select current_schema() as name`.execute(this.db)
    return rows.rows.filter((r) => r.name !== null)
  }

  async getTables(
    options: DatabaseMetadataOptions = { withInternalKyselyTables: false },
  ): Promise<TableMetadata[]> {
    const rows = await sql<ColumnRow>`
      select ns.nspname as schema, c.relname as table, c.relkind as table_type,
             a.attname as column, typ.typname as type, tns.nspname as type_schema,
             a.attnotnull as not_null, a.atthasdef as has_default
        from pg_catalog.pg_class c
        join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
        left join pg_catalog.pg_attribute a
               on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        left join pg_catalog.pg_type typ on typ.oid = a.atttypid
        left join pg_catalog.pg_namespace tns on tns.oid = typ.typnamespace
       where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p')
       order by c.relname, a.attnum`.execute(this.db)
    const tables = new Map<string, TableMetadata>()
    for (const row of rows.rows) {
      if (!options.withInternalKyselyTables && row.table.startsWith('kysely_migration')) continue
      let table = tables.get(row.table)
      if (!table) {
        table = { name: row.table, schema: row.schema, isView: row.table_type === 'v', columns: [] }
        tables.set(row.table, table)
      }
      if (row.column === null) continue
      ;(table.columns as TableMetadata['columns'][number][]).push({
        name: row.column,
        dataType: row.type ?? '',
        dataTypeSchema: row.type_schema ?? undefined,
        isNullable: !row.not_null,
        hasDefaultValue: row.has_default === true,
        isAutoIncrementing: false,
      })
    }
    return [...tables.values()]
  }

  async getMetadata(options?: DatabaseMetadataOptions): Promise<DatabaseMetadata> {
    return { tables: await this.getTables(options) }
  }
}

/** The PostgreSQL dialect with its introspection kept to the store's own schema (see above). */
export function currentSchemaDialect(dialect: Dialect): Dialect {
  return wrapDialect(dialect, { createIntrospector: (db) => new CurrentSchemaIntrospector(db) })
}
