import { describe, expect, it } from 'vitest'
import { SpentWindows } from './spent-windows.js'

const at = (iso: string) => new Date(`2026-03-01T00:${iso}Z`)

describe('SpentWindows', () => {
  it('refuses until the window ends, then forgets it', () => {
    const spent = new SpentWindows()
    spent.note('k', at('01:00.000'))
    expect(spent.retryAfter('k', at('00:00.000'))).toBe(60)
    expect(spent.retryAfter('k', at('00:59.500'))).toBe(1)
    expect(spent.retryAfter('k', at('01:00.000'))).toBeUndefined()
    expect(spent.retryAfter('other', at('00:00.000'))).toBeUndefined()
  })

  it('keeps at most its bound, dropping the oldest entry', () => {
    const spent = new SpentWindows(2)
    for (const key of ['a', 'b', 'c']) spent.note(key, at('01:00.000'))
    expect(spent.retryAfter('a', at('00:00.000'))).toBeUndefined()
    expect(spent.retryAfter('b', at('00:00.000'))).toBe(60)
    expect(spent.retryAfter('c', at('00:00.000'))).toBe(60)
  })
})
