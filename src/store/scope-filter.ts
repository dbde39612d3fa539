import { type Expression, type ExpressionBuilder, type SqlBool, sql } from 'kysely'
import type { ItemScope } from '../policy/index.js'

/**
 * Turns readable-item scopes (policy/ItemScope) into a SQL predicate: an item is listed only when
 * every scope admits it by id or, for owned items, by owner. A list therefore never shows an item
 * a direct read would refuse.
 */
export function scopePredicate<DB, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  scopes: readonly ItemScope[],
  idColumn: string,
  ownerColumn?: string,
): Expression<SqlBool> {
  const parts: Expression<SqlBool>[] = []
  for (const scope of scopes) {
    if (scope.all) continue
    const alternatives: Expression<SqlBool>[] = []
    if (scope.ids.size > 0)
      alternatives.push(sql<SqlBool>`${sql.ref(idColumn)} in (${sql.join([...scope.ids])})`)
    if (ownerColumn && scope.anyOwner)
      alternatives.push(sql<SqlBool>`${sql.ref(ownerColumn)} is not null`)
    if (ownerColumn && !scope.anyOwner && scope.ownerIds.size > 0) {
      alternatives.push(sql<SqlBool>`${sql.ref(ownerColumn)} in (${sql.join([...scope.ownerIds])})`)
    }
    parts.push(alternatives.length > 0 ? eb.or(alternatives) : sql<SqlBool>`1 = 0`)
  }
  return parts.length > 0 ? eb.and(parts) : sql<SqlBool>`1 = 1`
}
