import {
  type AuditEventInput,
  type ChainedEvent,
  chainHash,
  encodeResources,
  GENESIS_HASH,
} from './event.js'

/** Runs one SQL statement (`?` placeholders) on the connection of the appending transaction. */
export type Exec = (sql: string, params: readonly unknown[]) => Promise<Record<string, unknown>[]>

export type ChainDialect = 'sqlite' | 'postgres'

/** `?` → `$1, $2, …` on PostgreSQL. */
function placeholders(dialect: ChainDialect, text: string): string {
  if (dialect === 'sqlite') return text
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/** An event's columns, in the order they are stored and exported (audit/export.ts). */
export const AUDIT_COLUMNS = [
  'account_id',
  'seq',
  'id',
  'at',
  'transaction_id',
  'actor_user_id',
  'credential_kind',
  'credential_ref',
  'sat_id',
  'sat_creator_id',
  'client_ip',
  'method',
  'route',
  'operation',
  'resources',
  'decision',
  'reason',
  'status',
  'operations_consumed',
  'operations_category',
  'prev_hash',
  'hash',
] as const

function row(e: ChainedEvent): unknown[] {
  return [
    e.accountId,
    e.seq,
    e.id,
    e.at,
    e.transactionId,
    e.actorUserId,
    e.credentialKind,
    e.credentialRef,
    e.satId,
    e.satCreatorId,
    e.clientIp,
    e.method,
    e.route,
    e.operation,
    encodeResources(e.resources),
    e.decision,
    e.reason,
    e.status,
    e.operationsConsumed,
    e.operationsCategory,
    e.prevHash,
    e.hash,
  ]
}

/**
 * Appends events to their accounts' chains inside the caller's transaction: per account (in a
 * fixed order, so two transactions never wait on each other's heads), the head row is locked
 * (`for update` on PostgreSQL; SQLite has one writer), the events are numbered and hashed after
 * it, inserted in one statement, and the head moves. Any failure throws: the caller's
 * transaction then rolls back, its own writes with it.
 */
export async function appendToChains(
  exec: Exec,
  dialect: ChainDialect,
  events: readonly AuditEventInput[],
): Promise<ChainedEvent[]> {
  const q = (text: string) => placeholders(dialect, text)
  const lock = dialect === 'postgres' ? ' for update' : ''
  const byAccount = new Map<string, AuditEventInput[]>()
  for (const e of events) {
    const list = byAccount.get(e.accountId)
    if (list) list.push(e)
    else byAccount.set(e.accountId, [e])
  }
  const chained: ChainedEvent[] = []
  for (const accountId of [...byAccount.keys()].sort()) {
    const selectHead = q(
      `select last_seq, last_hash from audit_chain_heads where account_id = ?${lock}`,
    )
    let head = (await exec(selectHead, [accountId]))[0]
    if (!head) {
      await exec(
        q(
          'insert into audit_chain_heads (account_id, last_seq, last_hash, anchor_seq, anchor_hash) values (?, 0, ?, 0, ?) on conflict (account_id) do nothing',
        ),
        [accountId, GENESIS_HASH, GENESIS_HASH],
      )
      head = (await exec(selectHead, [accountId]))[0]
    }
    if (!head) throw new Error('audit chain head missing after insert')
    const rows = chainAfter({ seq: Number(head.last_seq), hash: String(head.last_hash) }, [
      ...(byAccount.get(accountId) ?? []),
    ])
    const last = rows[rows.length - 1] as ChainedEvent
    const seq = last.seq
    const prevHash = last.hash
    const tuple = `(${AUDIT_COLUMNS.map(() => '?').join(', ')})`
    await exec(
      q(
        `insert into audit_events (${AUDIT_COLUMNS.join(', ')}) values ${rows.map(() => tuple).join(', ')}`,
      ),
      rows.flatMap(row),
    )
    await exec(q('update audit_chain_heads set last_seq = ?, last_hash = ? where account_id = ?'), [
      seq,
      prevHash,
      accountId,
    ])
    chained.push(...rows)
  }
  return chained
}

/** Where an account's chain ends: its last event's number and hash. */
export interface ChainHead {
  seq: number
  hash: string
}

/** The events numbered and hashed after `head`, in order (one account's, at least one). */
export function chainAfter(head: ChainHead, events: readonly AuditEventInput[]): ChainedEvent[] {
  let seq = head.seq
  let prevHash = head.hash
  const rows: ChainedEvent[] = []
  for (const e of events) {
    seq++
    const hash = chainHash(e, seq, prevHash)
    rows.push({ ...e, seq, prevHash, hash })
    prevHash = hash
  }
  return rows
}

/** PostgreSQL types of the columns that are not text (VALUES in a SELECT needs them named). */
const PG_CASTS: Partial<Record<(typeof AUDIT_COLUMNS)[number], string>> = {
  seq: 'bigint',
  status: 'integer',
  operations_consumed: 'integer',
}

const PG_TUPLE_CASTS = AUDIT_COLUMNS.map((c) => `::${PG_CASTS[c] ?? 'text'}`)

/**
 * PostgreSQL, one statement in its own transaction (one round trip, the head row locked only
 * for that statement and its commit): appends `rows` — one account's events, chained after
 * the head the caller predicts — only if the chain still ends at `predicted`; the head moves in
 * the same statement. Answers false, having written nothing, when the head is elsewhere (another
 * node or a write appended meanwhile, or an earlier batch predicted on failed): the caller then
 * appends under appendToChains' lock. Concurrent statements on one head queue on its row lock
 * and each re-checks the head once the one before it commits (READ COMMITTED), so batches of
 * one node pipeline, each predicting after the one before.
 */
export async function appendPredictedPg(
  exec: Exec,
  predicted: ChainHead,
  rows: readonly ChainedEvent[],
): Promise<boolean> {
  const first = rows[0]
  const last = rows[rows.length - 1]
  if (!first || !last) return true
  let n = 0
  const param = (i: number) => `$${++n}${PG_TUPLE_CASTS[i]}`
  const tuples = rows.map(() => `(${AUDIT_COLUMNS.map((_, i) => param(i)).join(', ')})`)
  const head = [`$${++n}`, `$${++n}`, `$${++n}`, `$${++n}`, `$${++n}`]
  const text = `with moved as (
      update audit_chain_heads set last_seq = ${head[0]}::bigint, last_hash = ${head[1]}
      where account_id = ${head[2]} and last_seq = ${head[3]}::bigint and last_hash = ${head[4]}
      returning account_id
    ), appended as (
      insert into audit_events (${AUDIT_COLUMNS.join(', ')})
      select * from (values ${tuples.join(', ')}) as v (${AUDIT_COLUMNS.join(', ')})
      where exists (select 1 from moved)
      returning seq
    )
    select count(*)::int as n from appended`
  const params = [
    ...rows.flatMap(row),
    last.seq,
    last.hash,
    first.accountId,
    predicted.seq,
    predicted.hash,
  ]
  const result = await exec(text, params)
  return Number(result[0]?.n) === rows.length
}
