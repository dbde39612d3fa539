import { createHash } from 'node:crypto'

/**
 * One audit event (issue 13, part 1): who did what to which records, from where, and whether it
 * was allowed. Only ids, field names and fixed codes: never a secret, a password, document
 * content, an attribute value or a search filter value.
 */
export interface AuditEventInput {
  /** The chain it belongs to: the caller's account, or NO_ACCOUNT. */
  accountId: string
  id: string
  at: string
  transactionId: string
  actorUserId: string | null
  credentialKind: string | null
  /** A non-secret handle of the credential: a short prefix of its stored digest, or the SAT id. */
  credentialRef: string | null
  satId: string | null
  satCreatorId: string | null
  clientIp: string | null
  method: string
  route: string
  operation: string
  resources: AuditResources
  decision: AuditDecision
  /** The error code when denied or failed (e.g. PERMISSION_DENIED, INTERNAL). */
  reason: string | null
  status: number
  operationsConsumed: number
  operationsCategory: string | null
}

export type AuditDecision = 'allowed' | 'denied' | 'error'

/** Per resource kind, the ids touched, or only their count past RESOURCE_IDS_MAX. */
export type AuditResources = Record<string, string[] | { count: number }>

/** The chain of events that belong to no account (an unknown credential, key rotation). */
export const NO_ACCOUNT = ''

/** The hash every chain starts from. */
export const GENESIS_HASH = '0'.repeat(64)

/** A stored event: its place in the chain and its hashes. */
export interface ChainedEvent extends AuditEventInput {
  seq: number
  prevHash: string
  hash: string
}

/**
 * The canonical encoding hashed into the chain: every field in a fixed order (a JSON array, so
 * no key order or spacing can vary), resources with sorted kinds, versioned.
 */
export function canonical(event: AuditEventInput, seq: number, prevHash: string): string {
  const resources = Object.keys(event.resources)
    .sort()
    .map((k) => [k, event.resources[k]])
  return JSON.stringify([
    'coffer-audit-v1',
    event.accountId,
    seq,
    event.id,
    event.at,
    event.transactionId,
    event.actorUserId,
    event.credentialKind,
    event.credentialRef,
    event.satId,
    event.satCreatorId,
    event.clientIp,
    event.method,
    event.route,
    event.operation,
    resources,
    event.decision,
    event.reason,
    event.status,
    event.operationsConsumed,
    event.operationsCategory,
    prevHash,
  ])
}

export function chainHash(event: AuditEventInput, seq: number, prevHash: string): string {
  return createHash('sha256')
    .update(canonical(event, seq, prevHash))
    .digest('hex')
}

/** Resources as stored (JSON text with sorted kinds) and read back. */
export function encodeResources(resources: AuditResources): string {
  const sorted: AuditResources = {}
  for (const k of Object.keys(resources).sort()) sorted[k] = resources[k] as string[]
  return JSON.stringify(sorted)
}
