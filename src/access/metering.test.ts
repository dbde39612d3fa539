import { describe, expect, it } from 'vitest'
import { operationsFor } from './metering.js'
import { OPERATIONS, type OperationId } from './operations.js'

describe('operationsFor: the spec table rules', () => {
  it.each([
    ['per_item', 0, false, 0],
    ['per_item', 3, false, 3],
    ['per_item', 3, true, 3],
    ['per_item_if_full', 0, true, 0],
    ['per_item_if_full', 5, true, 5],
    ['per_item_if_full', 5, false, 1],
    ['per_item_if_full', 0, false, 1],
    ['one_plus_per_item_if_full', 0, true, 1],
    ['one_plus_per_item_if_full', 4, true, 5],
    ['one_plus_per_item_if_full', 4, false, 1],
  ] as const)('%s, %i items, full=%s: %i', (rule, items, full, want) => {
    expect(operationsFor(rule, { items, full })).toBe(want)
  })
})

describe('the catalog says how each operation counts', () => {
  it('meters exactly the routes of the spec table', () => {
    const metered = Object.entries(OPERATIONS)
      .filter(([, spec]) => spec.metering)
      .map(([id, spec]) => [id, spec.metering?.category, spec.metering?.rule])
    expect(Object.fromEntries(metered.map(([id, ...rest]) => [id as OperationId, rest]))).toEqual({
      'user.read_v2': ['user_read', 'per_item_if_full'],
      'user.list': ['user_read', 'per_item_if_full'],
      'document.read_v2': ['document_read', 'per_item'],
      'document.read': ['document_read', 'per_item'],
      'document.list': ['document_list', 'per_item_if_full'],
      'document.list_by_schema': ['document_list', 'per_item_if_full'],
      'document.search': ['document_search', 'one_plus_per_item_if_full'],
      'document.search_legacy': ['document_search', 'one_plus_per_item_if_full'],
      'document.search_legacy_query': ['document_search', 'one_plus_per_item_if_full'],
      'user.search': ['user_search', 'one_plus_per_item_if_full'],
    })
  })
})
