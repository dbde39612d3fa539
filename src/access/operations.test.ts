import { describe, expect, it } from 'vitest'
import { isOperationId, OPERATIONS } from './operations.js'

describe('the operation catalog', () => {
  const entries = Object.entries(OPERATIONS)

  it('names operations `<resource>.<action>` in snake case', () => {
    for (const [id] of entries) expect(id).toMatch(/^[a-z]+(_[a-z0-9]+)*\.[a-z]+(_[a-z0-9]+)*$/)
  })

  it('gives each documented operation a unique camelCase OpenAPI name', () => {
    const names = entries.flatMap(([, spec]) => (spec.openapi === undefined ? [] : [spec.openapi]))
    for (const name of names) expect(name).toMatch(/^[a-z][A-Za-z0-9]*$/)
    expect(new Set(names).size).toBe(names.length)
  })

  it('knows its own ids only', () => {
    expect(isOperationId('document.read')).toBe(true)
    expect(isOperationId('document.steal')).toBe(false)
    expect(isOperationId('toString')).toBe(false)
    expect(isOperationId(undefined)).toBe(false)
  })
})
