import { type AuditKind, auditTouch } from '../../audit/context.js'

const KINDS: Record<string, AuditKind> = {
  Vault: 'vault',
  Document: 'document',
  Blob: 'blob',
  User: 'user',
  Group: 'group',
  Schema: 'schema',
  PasswordResetFlow: 'password_reset_flow',
  ScopedAccessToken: 'scoped_access_token',
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * Names in the request's audit event the records a simulated resource names (its vault,
 * document, user…): asking who may act on a record, or what a user may do, reads about them.
 */
export function auditResourceIds(tokens: readonly string[]): void {
  for (let i = 1; i < tokens.length; i += 2) {
    const kind = KINDS[tokens[i - 1] as string]
    const id = tokens[i] as string
    if (kind && UUID.test(id)) auditTouch(kind, id.toLowerCase())
  }
}
