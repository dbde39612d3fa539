import { describe, expect, it } from 'vitest'
import { RawJson, stringifyWithRaw } from './raw-json.js'

describe('stringifyWithRaw', () => {
  it('writes what JSON.stringify writes for plain data', () => {
    const values: unknown[] = [
      null,
      true,
      0,
      -0,
      1e21,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      'a "quoted"\n\u2028 line \ud800',
      [],
      {},
      [1, undefined, () => 1, null, 'x'],
      { a: 1, b: undefined, c: () => 1, d: [{ e: null }], 2: 'two', __proto__x: 1 },
      { at: new Date('2026-01-01T00:00:00.000Z') },
      JSON.parse('{"__proto__": {"x": 1}, "z": "\\u0000"}'),
    ]
    for (const value of values) expect(stringifyWithRaw(value)).toBe(JSON.stringify(value))
    expect(stringifyWithRaw(undefined)).toBe('null')
  })

  it('writes a RawJson as its text, where JSON.stringify writes its parsed value', () => {
    const text = JSON.stringify({ name: 'Ada', tags: ['x', 1e21, null], nested: { '1': 2 } })
    const payload = {
      result: 'success',
      documents: [
        { id: 'a', document: new RawJson(text) },
        { id: 'b', document: new RawJson('3') },
      ],
    }
    const out = stringifyWithRaw(payload)
    expect(out).toBe(JSON.stringify(payload))
    expect(out).toContain(`"document":${text}`)
  })
})
