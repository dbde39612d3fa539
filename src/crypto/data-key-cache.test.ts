import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { DataKeyCache, PRELOAD_HOLD_MS } from './data-key-cache.js'

describe('DataKeyCache', () => {
  it('keeps at most its size, the least recently used leaving first', () => {
    const cache = new DataKeyCache(() => 0, 3)
    const keys = [0, 1, 2, 3].map(() => randomBytes(32))
    cache.set('a', 'k0', keys[0] as Buffer)
    cache.set('b', 'k1', keys[1] as Buffer)
    cache.set('c', 'k2', keys[2] as Buffer)
    expect(cache.get('a', 'k0')).toBe(keys[0])
    cache.set('d', 'k3', keys[3] as Buffer)
    expect(cache.entries).toBe(3)
    expect(cache.get('b', 'k1')).toBeUndefined()
    expect(cache.get('a', 'k0')).toBe(keys[0])
    expect(cache.get('c', 'k2')).toBe(keys[2])
    expect(cache.get('d', 'k3')).toBe(keys[3])
    // Keyed by account and id together.
    expect(cache.get('a', 'k3')).toBeUndefined()
  })

  it("holds a preloaded account's keys past the bound until the hold ends", () => {
    let now = 1_000
    const cache = new DataKeyCache(() => now, 2)
    cache.hold('held')
    cache.set('held', 'k0', randomBytes(32))
    cache.set('held', 'k1', randomBytes(32))
    cache.set('other', 'k2', randomBytes(32))
    // The held account's keys stay: the other one leaves, the oldest though it is.
    expect(cache.has('held', 'k0')).toBe(true)
    expect(cache.has('held', 'k1')).toBe(true)
    expect(cache.has('other', 'k2')).toBe(false)
    cache.set('other', 'k3', randomBytes(32))
    expect(cache.entries).toBe(2)
    now += PRELOAD_HOLD_MS
    cache.set('other', 'k4', randomBytes(32))
    expect(cache.entries).toBe(2)
    expect(cache.has('other', 'k4')).toBe(true)
    expect(cache.has('held', 'k0')).toBe(false)
  })
})
