import type { AuditEventInput } from '../../src/audit/event.js'

let n = 0

/** A well-formed event for the writer's tests, numbered afresh each call (ids stay unique). */
export function auditEvent(accountId: string): AuditEventInput {
  n++
  const tail = String(n).padStart(12, '0')
  return {
    accountId,
    id: `00000000-0000-4000-8000-${tail}`,
    at: new Date().toISOString(),
    transactionId: `10000000-0000-4000-8000-${tail}`,
    actorUserId: null,
    credentialKind: 'api_key',
    credentialRef: 'abcdefabcdef',
    satId: null,
    satCreatorId: null,
    clientIp: '10.0.0.1',
    method: 'GET',
    route: '/v1/vaults',
    operation: 'vault.list',
    resources: { vault: [`20000000-0000-4000-8000-${tail}`] },
    decision: 'allowed',
    reason: null,
    status: 200,
    operationsConsumed: 1,
    operationsCategory: null,
  }
}
