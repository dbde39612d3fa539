/**
 * Billing operations (the spec's "Operations (billing units consumed)" table), pure: the
 * categories, the counting rules the catalog (access/operations.ts) gives each metered
 * operation, and what a request consumed by its rule.
 */

/** The categories usage is reported in, one per row family of the spec's table. */
export const CATEGORIES = [
  'user_read',
  'document_read',
  'document_list',
  'document_search',
  'user_search',
] as const
export type Category = (typeof CATEGORIES)[number]

/**
 * - `per_item`: one per item returned (documents read by id).
 * - `per_item_if_full`: `full=true`: one per item returned; `full=false`: one (user reads and
 *   lists, document lists).
 * - `one_plus_per_item_if_full`: `full_document` true: one plus one per item returned; false:
 *   one (searches).
 */
export type MeteringRule = 'per_item' | 'per_item_if_full' | 'one_plus_per_item_if_full'

export interface Metering {
  readonly category: Category
  readonly rule: MeteringRule
}

/** What a metered route returned: its items, and whether they were asked for in full. */
export interface Returned {
  readonly items: number
  readonly full: boolean
}

/** The operations one successful request consumed under its rule. */
export function operationsFor(rule: MeteringRule, returned: Returned): number {
  switch (rule) {
    case 'per_item':
      return returned.items
    case 'per_item_if_full':
      return returned.full ? returned.items : 1
    case 'one_plus_per_item_if_full':
      return returned.full ? 1 + returned.items : 1
  }
}
