/** One letter of a policy's `Activities`: create, read, update, delete. */
export type Activity = 'C' | 'R' | 'U' | 'D'

/** A policy statement exactly as groups and SATs carry it (spec, Policy object). */
export interface PolicyStatement {
  Resources: string[]
  Activities: string
}

/**
 * A concrete resource such as `User::<id>` or `Vault::<id>::Document::` (a collection: empty last
 * token). `ownerId` is the owner of a Document or Blob item (null when unowned). An owner-scoped
 * resource, used when an ownership change needs C or D "on `…::$[Owner=X]`", ends in the token
 * `$[Owner=<X's id>]` (see `ownerScoped`).
 */
export interface Resource {
  tokens: readonly string[]
  ownerId?: string | null
}

/** Who is asking: the user id that `self` refers to (a SAT's creator for SATs). */
export interface Caller {
  userId: string | null
}

export interface Permission {
  activity: Activity
  resource: Resource
}

/**
 * What a route (or a service, for per-object rules) needs: a permission, a combination, or
 * `readAny` — some R matcher covers the collection or one of its items (list endpoints, which
 * then show only the readable items).
 */
export type Requirement =
  | Permission
  | { allOf: Requirement[] }
  | { anyOf: Requirement[] }
  | { readAny: Resource }
  /**
   * Some matcher grants `activity` on the collection or one of its items: the coarse check of
   * item routes whose exact rule depends on the stored item (its owner); the service then
   * checks the item itself.
   */
  | { anyItem: { activity: Activity; collection: Resource } }
