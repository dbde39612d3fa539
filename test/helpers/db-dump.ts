import { sql } from 'kysely'
import type { Store } from '../../src/store/db.js'

/** Every table's rows as text, on either engine: what `pg_dump` (or `sqlite3 .dump`) would show. */
export async function logicalDump(store: Store): Promise<string> {
  const names =
    store.dialect === 'sqlite'
      ? sql<{ name: string }>`select name from sqlite_master where type = 'table'`
      : // pg_catalog, not information_schema (see shard-rule.ts: concurrent schema drops)
        sql<{ name: string }>`select c.relname::text as name from pg_class c
          join pg_namespace s on s.oid = c.relnamespace
          where s.nspname = current_schema() and c.relkind in ('r', 'p')`
  const tables = (await names.execute(store.db)).rows.map((r) => r.name)
  if (!tables.includes('users')) throw new Error(`unexpected tables: ${tables.join(', ')}`)
  const parts: string[] = []
  for (const table of tables) {
    const rows = await sql`select * from ${sql.table(table)}`.execute(store.db)
    parts.push(`${table}: ${JSON.stringify(rows.rows)}`)
  }
  return parts.join('\n')
}
