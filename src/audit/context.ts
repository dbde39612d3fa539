import { AsyncLocalStorage } from 'node:async_hooks'
import { errors } from '../lib/errors.js'
import { newId } from '../lib/ids.js'
import { type Meter, noopMeter } from '../metrics/meter.js'
import { isDatabaseUnavailable } from '../store/db-errors.js'
import { appendToChains, type ChainDialect, type Exec } from './chain.js'
import type { AuditEventInput, ChainedEvent } from './event.js'
import { ResourceSet } from './resources.js'

/**
 * The audit state of one request (or CLI command), reachable from any code it runs through
 * AsyncLocalStorage, like its deadline (store/request-deadline.ts): routes and services record
 * what they touch with `auditTouch`, the store appends the event inside the request's write
 * transaction (store/auditing-driver.ts), and the HTTP layer stores it otherwise
 * (http/audit.ts, through the group commit of audit/writer.ts).
 */
export class AuditContext {
  readonly resources = new ResourceSet()
  /** Account and user learned while handling (a login), when no credential names them. */
  account: string | null = null
  user: string | null = null
  /**
   * Set once the access rule has let the request in: from then on its first committed write
   * carries its event (writes before it — a SAT's use count — are bookkeeping).
   */
  inHandler = false
  /** The event is stored. */
  stored = false
  /** Storing it failed: the request is answered 503 AUDIT_UNAVAILABLE. */
  failed = false

  constructor(
    /** The event as the request stands, with the outcome of a write that commits. */
    readonly snapshotForWrite: () => AuditEventInput,
    readonly meter: Meter = noopMeter,
    /** Told of the event once its write committed (the streaming copy). */
    readonly onStored: (events: readonly ChainedEvent[]) => void = () => {},
  ) {}
}

const storage = new AsyncLocalStorage<AuditContext | null>()

export function runWithAudit<T>(context: AuditContext, fn: () => T): T {
  return storage.run(context, fn)
}

export function currentAudit(): AuditContext | undefined {
  return storage.getStore() ?? undefined
}

/** Whether the current request's event would be appended with a write now. */
export function auditPending(): boolean {
  const context = storage.getStore()
  return !!context && context.inHandler && !context.stored && !context.failed
}

/** Runs `fn` outside any request's audit (the group commit's own transactions). */
export function outsideAudit<T>(fn: () => T): T {
  return storage.run(null, fn)
}

/** Records resources of one kind the current request touched (ids only; no-op outside one). */
export function auditTouch(kind: AuditKind, ids: string | readonly string[] | undefined): void {
  const context = storage.getStore()
  if (!context || ids === undefined) return
  context.resources.add(kind, typeof ids === 'string' ? [ids] : ids)
}

/** Records that a list or search answered `n` items of a kind it does not name one by one. */
export function auditCount(kind: AuditKind, n: number): void {
  storage.getStore()?.resources.addCount(kind, n)
}

/** Names the account (and user) of a request no credential names: a login, a CLI command. */
export function auditSubject(accountId: string, userId?: string): void {
  const context = storage.getStore()
  if (!context) return
  context.account = accountId
  if (userId !== undefined) context.user = userId
}

export type AuditKind =
  | 'account'
  | 'vault'
  | 'document'
  | 'blob'
  | 'user'
  | 'group'
  | 'schema'
  | 'user_schema'
  | 'scoped_access_token'
  | 'password_reset_flow'

/**
 * Called by the store right before a transaction that wrote commits (and around a lone write
 * statement): appends the current request's event on the same connection, so a failed append
 * fails the commit and the write rolls back. Returns what to do once the commit succeeded.
 */
export async function appendWithWrite(
  exec: Exec,
  dialect: ChainDialect,
): Promise<(() => void) | undefined> {
  const context = storage.getStore()
  if (!context?.inHandler || context.stored || context.failed) return undefined
  let stored: ChainedEvent[]
  try {
    stored = await appendToChains(exec, dialect, [context.snapshotForWrite()])
  } catch (error) {
    context.failed = true
    context.meter.count('audit_appends', { outcome: 'failed', path: 'write' })
    throw auditFailure(error)
  }
  return () => {
    context.stored = true
    context.meter.count('audit_appends', { outcome: 'ok', path: 'write' })
    context.onStored(stored)
  }
}

/**
 * The error a request gets when its event could not be stored: a lost database is said as
 * such (503 DATABASE_UNAVAILABLE, as for any statement); anything else 503 AUDIT_UNAVAILABLE.
 */
export function auditFailure(cause: unknown) {
  return isDatabaseUnavailable(cause)
    ? errors.databaseUnavailable(cause)
    : errors.auditUnavailable(cause)
}

/** Whether a write statement is audit bookkeeping or a counter that carries no event. */
export function isUnauditedWrite(sqlText: string): boolean {
  return /^\s*(insert\s+into|update|delete\s+from)\s+"?(login_throttle|audit_events|audit_chain_heads)\b/i.test(
    sqlText,
  )
}

export function isWrite(sqlText: string): boolean {
  return /^\s*(insert|update|delete|merge)\b/i.test(sqlText)
}

/** A new id (lib/ids.ts `newId`) for a resource the current request creates, recorded as touched. */
export function newTouchedId(kind: AuditKind, at?: number): string {
  const id = newId(at)
  auditTouch(kind, id)
  return id
}

/**
 * For a route whose handler writes bookkeeping before its real write (a login: its counters and
 * a used MFA code, then the access token): from here on its next write carries the event.
 */
export function auditWritesFromHere(): void {
  const context = storage.getStore()
  if (context) context.inHandler = true
}
