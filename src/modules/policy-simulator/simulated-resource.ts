import { errors } from '../../lib/errors.js'

/**
 * A resource the policy simulator is asked about, as policies name resources
 * (docs/policy-semantics.md): `Vault::<id>::Document::<id>`, `User::<id>::Password`, a collection
 * with an empty last token (`Vault::<id>::Blob::`), or an owner-scoped collection
 * (`Vault::<id>::Document::$[Owner=<user id>]`, where creating an owned item is checked). It is
 * concrete: `.*` and the other matcher keywords are refused, since no request names them.
 */
export interface SimulatedResource {
  text: string
  tokens: string[]
  /** A Document or BLOB item: its owner must be loaded for `$[Owner=…]` matchers. */
  ownedItem?: { kind: 'Document' | 'Blob'; vaultId: string; id: string }
  /** A collection whose read is a list (routes check it with `readAny`, see below). */
  listable: boolean
}

export const MAX_RESOURCE_LENGTH = 1024

/** Every type name a route's check uses (src/modules/*.routes.ts and their services). */
const TYPES = new Set([
  'Account',
  'Audit',
  'Backups',
  'Blob',
  'Document',
  'Email',
  'Group',
  'GroupMembership',
  'Message',
  'Password',
  'PasswordResetFlow',
  'PolicySimulator',
  'ScopedAccessToken',
  'Schema',
  'Search',
  'Settings',
  'User',
  'UserSchema',
  'Vault',
])

/**
 * The collections whose read is a list: their routes check `readAny` (some R matcher covers the
 * collection or any of its items), not R on the collection alone. Kept beside the routes'
 * declarations it mirrors: vaults, users, groups, password reset flows, and a vault's documents,
 * BLOBs and schemas.
 */
const LISTABLE = [
  ['Vault', ''],
  ['User', ''],
  ['Group', ''],
  ['PasswordResetFlow', ''],
  ['Vault', '*', 'Document', ''],
  ['Vault', '*', 'Blob', ''],
  ['Vault', '*', 'Schema', ''],
]

const ID = /^[A-Za-z0-9_-]{1,128}$/
const OWNER_SCOPE = /^\$\[Owner=([A-Za-z0-9_-]{1,128})\]$/

const invalid = (problem: string) => errors.invalidField('resource', problem)

export function parseSimulatedResource(text: unknown): SimulatedResource {
  if (typeof text !== 'string' || text === '') throw invalid('is required')
  if (text.length > MAX_RESOURCE_LENGTH)
    throw invalid(`must be at most ${MAX_RESOURCE_LENGTH} characters`)
  const tokens = text.split('::')
  const last = tokens.length - 1
  tokens.forEach((token, i) => {
    if (i % 2 === 0) {
      if (!TYPES.has(token)) throw invalid(`names an unknown resource type: ${describe(token)}`)
      return
    }
    if (i === last && token === '') return
    if (i === last && OWNER_SCOPE.test(token) && isOwned(tokens[i - 1])) return
    if (!ID.test(token))
      throw invalid(
        `holds ${describe(token)} where an id belongs (a concrete id: letters, digits, - and _)`,
      )
  })
  const resource: SimulatedResource = { text, tokens, listable: isListable(tokens) }
  const type = tokens[2]
  if (tokens.length === 4 && tokens[0] === 'Vault' && isOwned(type) && tokens[3] !== '') {
    if (!OWNER_SCOPE.test(tokens[3] as string)) {
      resource.ownedItem = {
        kind: type as 'Document' | 'Blob',
        vaultId: (tokens[1] as string).toLowerCase(),
        id: (tokens[3] as string).toLowerCase(),
      }
    }
  }
  return resource
}

function isOwned(type: string | undefined): boolean {
  return type === 'Document' || type === 'Blob'
}

function isListable(tokens: readonly string[]): boolean {
  return LISTABLE.some(
    (shape) =>
      shape.length === tokens.length && shape.every((t, i) => t === '*' || t === tokens[i]),
  )
}

function describe(token: string): string {
  return token === '' ? 'an empty token' : JSON.stringify(token.slice(0, 40))
}
