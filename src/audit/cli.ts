import { randomUUID } from 'node:crypto'
import { hostname, userInfo } from 'node:os'
import { AuditContext, runWithAudit } from './context.js'
import { type AuditEventInput, NO_ACCOUNT } from './event.js'
import type { AuditWriter } from './writer.js'

/** A data-changing CLI command, as the trail names it. */
export interface CliCommand {
  /** e.g. `cli.account.create`. */
  operation: string
  /** The command line's shape, e.g. `coffer mfa reset <account_id> <user_id>` (no values). */
  route: string
  accountId?: string
  userId?: string
}

function localActor(): string {
  try {
    return `${userInfo().username}@${hostname()}`
  } catch {
    return hostname()
  }
}

/**
 * Runs a CLI command that changes data under an audit context (issue 13): its first write
 * carries the event, as a request's does; a command that wrote nothing, or failed, has its event
 * stored after it. A command whose event cannot be stored fails (its write rolled back).
 * The actor is the operating-system user and host (there is no credential), in `client_ip`'s
 * place the literal `cli`.
 */
export async function runAudited<T>(
  writer: AuditWriter,
  command: CliCommand,
  fn: () => Promise<T>,
): Promise<T> {
  const transactionId = randomUUID()
  const event = (
    decision: AuditEventInput['decision'],
    reason: string | null,
  ): AuditEventInput => ({
    accountId: context.account ?? command.accountId ?? NO_ACCOUNT,
    id: randomUUID(),
    at: new Date().toISOString(),
    transactionId,
    actorUserId: context.user ?? command.userId ?? null,
    credentialKind: 'cli',
    credentialRef: localActor(),
    satId: null,
    satCreatorId: null,
    clientIp: 'cli',
    method: 'CLI',
    route: command.route,
    operation: command.operation,
    resources: context.resources.toJSON(),
    decision,
    reason,
    status: decision === 'allowed' ? 0 : 1,
    operationsConsumed: 0,
    operationsCategory: null,
  })
  const context: AuditContext = new AuditContext(
    () => event('allowed', null),
    undefined,
    (e) => writer.stored(e),
  )
  context.inHandler = true
  if (command.accountId) context.resources.add('account', [command.accountId])
  if (command.userId) context.resources.add('user', [command.userId])
  let result: T
  try {
    result = await runWithAudit(context, fn)
  } catch (error) {
    if (!context.stored && !context.failed) await writer.append(event('error', 'COMMAND_FAILED'))
    throw error
  }
  if (!context.stored) await writer.append(event('allowed', null))
  return result
}
