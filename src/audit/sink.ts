import { createWriteStream } from 'node:fs'
import type { Writable } from 'node:stream'
import type { ChainedEvent } from './event.js'
import { encodeResources } from './event.js'

/**
 * Bytes a sink may hold while its destination does not keep up (a stalled pipe, a slow disk).
 * Past it, events are dropped from the copy (never from the database) and counted; one line on
 * stderr says so each time dropping starts.
 */
export const AUDIT_SINK_BUFFER_BYTES = 8 * 1024 * 1024

export type SinkTarget = { kind: 'stdout' } | { kind: 'file'; path: string }

/**
 * COFFER_AUDIT_SINK: a comma-separated list of `db` (always on, may be named), `stdout`, and
 * absolute file paths (appended to, created 0600). Returns the extra targets, or a problem.
 */
export function parseAuditSink(value: string | undefined): SinkTarget[] | string {
  if (value === undefined || value.trim() === '') return []
  const targets: SinkTarget[] = []
  for (const raw of value.split(',')) {
    const item = raw.trim()
    if (item === 'db') continue
    if (item === 'stdout') targets.push({ kind: 'stdout' })
    else if (item.startsWith('/')) targets.push({ kind: 'file', path: item })
    else return 'COFFER_AUDIT_SINK takes db, stdout and absolute file paths, comma-separated'
  }
  return targets
}

/** One JSON line per event, as `coffer audit export --format jsonl` writes it. */
export function sinkLine(e: ChainedEvent): string {
  return `${JSON.stringify({
    account_id: e.accountId,
    seq: e.seq,
    id: e.id,
    at: e.at,
    transaction_id: e.transactionId,
    actor_user_id: e.actorUserId,
    credential_kind: e.credentialKind,
    credential_ref: e.credentialRef,
    sat_id: e.satId,
    sat_creator_id: e.satCreatorId,
    client_ip: e.clientIp,
    method: e.method,
    route: e.route,
    operation: e.operation,
    resources: JSON.parse(encodeResources(e.resources)),
    decision: e.decision,
    reason: e.reason,
    status: e.status,
    operations_consumed: e.operationsConsumed,
    operations_category: e.operationsCategory,
    prev_hash: e.prevHash,
    hash: e.hash,
  })}\n`
}

/**
 * The best-effort streaming copy of stored events (for shipping to a SIEM): called after the
 * durable append, never awaited by a request. A destination that stalls fills its bounded
 * buffer; then further events are dropped from the copy until it drains (`dropped` counts them).
 */
export class AuditSink {
  dropped = 0
  #dropping = false

  constructor(
    private readonly out: Writable,
    private readonly limitBytes = AUDIT_SINK_BUFFER_BYTES,
    private readonly warn: (message: string) => void = (m) => process.stderr.write(`${m}\n`),
  ) {
    out.on('error', (error) => this.warn(`audit sink failed: ${error.message}`))
  }

  static open(target: SinkTarget): AuditSink {
    if (target.kind === 'stdout') return new AuditSink(process.stdout)
    return new AuditSink(createWriteStream(target.path, { flags: 'a', mode: 0o600 }))
  }

  write(events: readonly ChainedEvent[]): void {
    for (const e of events) {
      if (this.out.writableLength >= this.limitBytes || this.out.destroyed) {
        this.dropped++
        if (!this.#dropping) {
          this.#dropping = true
          this.warn(
            'audit sink is not keeping up: events are dropped from the copy (the database has them)',
          )
        }
        continue
      }
      this.#dropping = false
      this.out.write(sinkLine(e))
    }
  }
}
