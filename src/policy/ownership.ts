import { ownerScoped, resource } from './resource.js'
import type { Requirement } from './types.js'

/**
 * The permission rules of owned items (Documents and BLOBs), exactly as the spec's table gives
 * them. `collection` is the item type's path, e.g. `['Vault', V, 'Document']`.
 */

/** Create: unowned needs C on `…::Document::`; owned by X needs C on `…::$[Owner=X]`. */
export function createItem(collection: string[], ownerId: string | null): Requirement {
  return ownerId === null
    ? { activity: 'C', resource: resource(...collection, '') }
    : { activity: 'C', resource: ownerScoped(collection, ownerId) }
}

/**
 * Changing the owner from `from` to `to` (spec, "Ownership change of a Document or BLOB"):
 * giving up the old owner needs D on the item when it was unowned, else D on
 * `…::$[Owner=from]`; taking the new one needs C on `…::$[Owner=to]`, or C on the collection
 * when it becomes unowned. No change needs nothing; Update never plays a part.
 */
export function changeOwner(
  collection: string[],
  itemId: string,
  from: string | null,
  to: string | null,
): Requirement | null {
  if (from === to) return null
  const release: Requirement =
    from === null
      ? { activity: 'D', resource: { tokens: [...collection, itemId], ownerId: null } }
      : { activity: 'D', resource: ownerScoped(collection, from) }
  return { allOf: [release, createItem(collection, to)] }
}
