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
    let seq = Number(head.last_seq)
    let prevHash = String(head.last_hash)
    const rows: ChainedEvent[] = []
    for (const e of byAccount.get(accountId) ?? []) {
      seq++
      const hash = chainHash(e, seq, prevHash)
      rows.push({ ...e, seq, prevHash, hash })
      prevHash = hash
    }
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
