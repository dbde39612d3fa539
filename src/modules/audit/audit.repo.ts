import type { Selectable } from 'kysely'
import type { Executor } from '../../store/executor.js'
import type { AuditEventsTable } from '../../store/schema.js'

export interface AuditFilter {
  from?: string
  to?: string
  actorUserId?: string
  resourceId?: string
  decision?: string
  operation?: string
  route?: string
}

function filtered(db: Executor, accountId: string, f: AuditFilter) {
  let q = db.selectFrom('audit_events').where('account_id', '=', accountId)
  if (f.from !== undefined) q = q.where('at', '>=', f.from)
  if (f.to !== undefined) q = q.where('at', '<', f.to)
  if (f.actorUserId !== undefined) q = q.where('actor_user_id', '=', f.actorUserId)
  if (f.decision !== undefined) q = q.where('decision', '=', f.decision)
  if (f.operation !== undefined) q = q.where('operation', '=', f.operation)
  if (f.route !== undefined) q = q.where('route', '=', f.route)
  // Ids are stored quoted in the resources' JSON; the filter is a validated UUID (no wildcard).
  if (f.resourceId !== undefined)
    q = q.where('resources', 'like', `%"${f.resourceId.toLowerCase()}"%`)
  return q
}

/** One page of an account's events, newest first, and how many match in all. */
export async function listEvents(
  db: Executor,
  accountId: string,
  f: AuditFilter,
  page: number,
  perPage: number,
): Promise<{ rows: Selectable<AuditEventsTable>[]; total: number }> {
  const rows = await filtered(db, accountId, f)
    .selectAll()
    .orderBy('seq', 'desc')
    .limit(perPage)
    .offset((page - 1) * perPage)
    .execute()
  const count = await filtered(db, accountId, f)
    .select((e) => e.fn.countAll().as('n'))
    .executeTakeFirstOrThrow()
  return { rows, total: Number(count.n) }
}
