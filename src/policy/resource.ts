import type { Resource } from './types.js'

export const SEP = '::'

/** `resource('User', id)` → `User::<id>`; pass '' as the last part for a collection. */
export function resource(...parts: string[]): Resource {
  return { tokens: parts }
}

/** A Document or Blob item with its owner, so `$[Owner=…]` matchers can apply. */
export function ownedItem(parts: string[], ownerId: string | null): Resource {
  return { tokens: parts, ownerId }
}

/** `Vault::V::Document::$[Owner=X]`: the resource the ownership-change rules name. */
export function ownerScoped(collection: string[], ownerId: string): Resource {
  return { tokens: [...collection, `$[Owner=${ownerId}]`] }
}

export function resourceText(r: Resource): string {
  return r.tokens.join(SEP)
}
