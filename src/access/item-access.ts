import { errors } from '../lib/errors.js'
import type { Activity, Grants, Requirement, Resource } from '../policy/index.js'

/**
 * Per-item checks of owned items, made once the item (and so its owner) is loaded. An item the
 * caller may not even read answers exactly as a missing one (404), so ids of others' items
 * reveal nothing; a readable item the caller may not change answers 401.
 */
export function assertItemAllows(
  grants: Grants,
  item: Resource,
  requirement: Requirement,
  notFound: () => Error,
): void {
  if (grants.satisfies(requirement)) return
  if (grants.can('R', item)) throw errors.permissionDenied()
  throw notFound()
}

export function itemRequirement(activity: Activity, item: Resource): Requirement {
  return { activity, resource: item }
}
