import { describe, expect, it } from 'vitest'
import { REDACTED, redactValues } from './provider-redaction.js'

describe('redactValues', () => {
  it('strips every spelling of a value in keys and values, leaving the rest', () => {
    const detail = {
      code: 21211,
      message: 'To +1 (555) 867-5309 / 15558675309 refused',
      'Ada@Example.com': 'ADA@EXAMPLE.COM',
      link: 'https://x.example/?e=ada%40example.com',
      nested: [{ to: 15558675309 }],
    }
    expect(redactValues(detail, ['+15558675309', 'ada@example.com'])).toEqual({
      code: 21211,
      message: `To ${REDACTED} / ${REDACTED} refused`,
      [REDACTED]: REDACTED,
      link: `https://x.example/?e=${REDACTED}`,
      nested: [{ to: REDACTED }],
    })
  })

  it('leaves short values alone and treats regex characters literally', () => {
    expect(redactValues({ m: 'a T here (x+y)' }, ['T', '(x+y)'])).toEqual({
      m: `a T here ${REDACTED}`,
    })
  })

  it('keeps a __proto__ key a plain key and cuts off deep nesting', () => {
    const parsed = JSON.parse('{"__proto__": {"polluted": "secret-value"}}')
    const out = redactValues(parsed, ['secret-value'])
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype)
    expect(Object.hasOwn(out, '__proto__')).toBe(true)
    let deep: unknown = 'secret-value'
    for (let i = 0; i < 100; i++) deep = [deep]
    expect(JSON.stringify(redactValues({ deep }, ['secret-value']))).not.toContain('secret')
  })
})
