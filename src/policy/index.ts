export {
  type CheckMode,
  type GrantingStatement,
  grantingStatements,
  type PolicySource,
} from './explain.js'
export { ANY, matches, SELF_ID } from './matcher.js'
export { changeOwner, createItem } from './ownership.js'
export {
  CompiledPolicy,
  Grants,
  type ItemScope,
  inScopes,
  PolicyFormatError,
  parsePolicy,
} from './policy.js'
export { ownedItem, ownerScoped, resource, resourceText } from './resource.js'
export type {
  Activity,
  Caller,
  Permission,
  PolicyStatement,
  Requirement,
  Resource,
} from './types.js'
