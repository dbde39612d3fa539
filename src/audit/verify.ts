import { type Kysely, PostgresAdapter, type Selectable, sql } from 'kysely'
import type { AuditEventsTable, Database } from '../store/schema.js'
import { type AuditEventInput, type AuditResources, chainHash } from './event.js'

/** What `coffer audit verify` found wrong, and where. */
export interface ChainProblem {
  account_id: string
  seq: number
  problem: 'changed' | 'removed' | 'reordered' | 'broken_link' | 'truncated'
  detail: string
}

export interface VerifyReport {
  accounts: number
  events: number
  problems: ChainProblem[]
}

/** Rows read per query while walking a chain. */
const PAGE = 1000
/** How far a reordered event is looked for around where it now sits. */
const REORDER_WINDOW = 16

export function eventOf(row: Selectable<AuditEventsTable>): AuditEventInput {
  return {
    accountId: row.account_id,
    id: row.id,
    at: row.at,
    transactionId: row.transaction_id,
    actorUserId: row.actor_user_id,
    credentialKind: row.credential_kind,
    credentialRef: row.credential_ref,
    satId: row.sat_id,
    satCreatorId: row.sat_creator_id,
    clientIp: row.client_ip,
    method: row.method,
    route: row.route,
    operation: row.operation,
    resources: JSON.parse(row.resources) as AuditResources,
    decision: row.decision as AuditEventInput['decision'],
    reason: row.reason,
    status: Number(row.status),
    operationsConsumed: Number(row.operations_consumed),
    operationsCategory: row.operations_category,
  }
}

/**
 * Walks each chain (or one account's) from its anchor (the genesis hash, or the last pruned
 * event's hash) to its head: every event's hash is recomputed from its content, its place and
 * the hash before it. A changed event fails its own hash; one moved to another place matches a
 * nearby place instead (reordered); a gap in the numbering is removed events; a link that does
 * not match the previous event's hash is a break; a chain that stops before its head lost its
 * last events.
 */
export function verifyChains(db: Kysely<Database>, accountId?: string): Promise<VerifyReport> {
  return inReadSnapshot(db, (snapshot) => walkChains(snapshot, accountId))
}

/**
 * Runs `fn` in one read transaction, so every query it makes sees the same state of the
 * database: the heads and the pages of events read at different times would otherwise race the
 * retention pruner (another node, or the server while `coffer audit verify` runs) and report
 * the events it just deleted as "removed". PostgreSQL: REPEATABLE READ, read only (one snapshot
 * for the whole transaction). SQLite: a deferred transaction on one connection; in WAL mode its
 * first read fixes the snapshot every later read sees, while writers go on beside it.
 */
async function inReadSnapshot<T>(
  db: Kysely<Database>,
  fn: (snapshot: Kysely<Database>) => Promise<T>,
): Promise<T> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    return db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute(fn)
  }
  return db.connection().execute(async (conn) => {
    await sql`begin`.execute(conn)
    try {
      return await fn(conn)
    } finally {
      await sql`commit`.execute(conn)
    }
  })
}

async function walkChains(db: Kysely<Database>, accountId?: string): Promise<VerifyReport> {
  let heads = db.selectFrom('audit_chain_heads').selectAll()
  if (accountId !== undefined) heads = heads.where('account_id', '=', accountId)
  const report: VerifyReport = { accounts: 0, events: 0, problems: [] }
  for (const head of await heads.orderBy('account_id').execute()) {
    report.accounts++
    const problem = (seq: number, kind: ChainProblem['problem'], detail: string) =>
      report.problems.push({ account_id: head.account_id, seq, problem: kind, detail })
    let expected = Number(head.anchor_seq) + 1
    let prev = head.anchor_hash
    for (;;) {
      const rows = await db
        .selectFrom('audit_events')
        .selectAll()
        .where('account_id', '=', head.account_id)
        .where('seq', '>=', expected)
        .orderBy('seq')
        .limit(PAGE)
        .execute()
      for (const row of rows) {
        const seq = Number(row.seq)
        report.events++
        if (seq > expected) {
          problem(expected, 'removed', `events ${expected}..${seq - 1} are missing`)
        }
        const event = eventOf(row)
        if (chainHash(event, seq, row.prev_hash) !== row.hash) {
          const from = findPlace(event, row.prev_hash, row.hash, seq)
          if (from !== undefined) problem(seq, 'reordered', `this event was written at ${from}`)
          else problem(seq, 'changed', 'its content does not match its hash')
        } else if (row.prev_hash !== prev) {
          problem(seq, 'broken_link', 'it does not follow the event before it')
        }
        prev = row.hash
        expected = seq + 1
      }
      if (rows.length < PAGE) break
    }
    const last = Number(head.last_seq)
    if (expected <= last) problem(expected, 'truncated', `events ${expected}..${last} are missing`)
    else if (prev !== head.last_hash && expected - 1 === last)
      problem(last, 'broken_link', 'the last event is not the head the chain recorded')
  }
  return report
}

function findPlace(
  event: AuditEventInput,
  prevHash: string,
  hash: string,
  seq: number,
): number | undefined {
  for (let d = 1; d <= REORDER_WINDOW; d++) {
    for (const s of [seq - d, seq + d]) {
      if (s > 0 && chainHash(event, s, prevHash) === hash) return s
    }
  }
  return undefined
}
