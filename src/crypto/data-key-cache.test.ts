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

  it('answers the newest entry without a move, and never once it has left', () => {
    const keys = [0, 1, 2, 3].map(() => randomBytes(32))
    const cache = new DataKeyCache(() => 0, 3)
    cache.set('a', 'k0', keys[0] as Buffer)
    cache.set('b', 'k1', keys[1] as Buffer)
    cache.set('c', 'k2', keys[2] as Buffer)
    // The first get moves a to the newest end; the second is the shortcut.
    expect(cache.get('a', 'k0')).toBe(keys[0])
    expect(cache.get('a', 'k0')).toBe(keys[0])
    cache.set('d', 'k3', keys[3] as Buffer)
    expect(cache.has('b', 'k1')).toBe(false)
    expect(cache.get('a', 'k0')).toBe(keys[0])
    // Same key id under another account, same account under another id: not the newest.
    expect(cache.get('x', 'k0')).toBeUndefined()
    expect(cache.get('a', 'k9')).toBeUndefined()
    // A bound of one: the newest is evicted by the next set, and a get of it misses.
    const one = new DataKeyCache(() => 0, 1)
    one.set('a', 'k0', keys[0] as Buffer)
    expect(one.get('a', 'k0')).toBe(keys[0])
    one.set('b', 'k1', keys[1] as Buffer)
    expect(one.get('a', 'k0')).toBeUndefined()
    expect(one.get('b', 'k1')).toBe(keys[1])
    // A replaced key is answered as replaced.
    one.set('b', 'k1', keys[2] as Buffer)
    expect(one.get('b', 'k1')).toBe(keys[2])
  })

  it('a held entry kept past the bound ends the shortcut: the LRU order stays exact', () => {
    let now = 1_000
    const keys = [0, 1, 2].map(() => randomBytes(32))
    const cache = new DataKeyCache(() => now, 1)
    cache.hold('held')
    cache.set('held', 'k0', keys[0] as Buffer)
    cache.set('other', 'k1', keys[1] as Buffer)
    // other was evicted (held stays): a get of it must miss, not take the shortcut.
    expect(cache.get('other', 'k1')).toBeUndefined()
    expect(cache.get('held', 'k0')).toBe(keys[0])
    now += PRELOAD_HOLD_MS
    cache.set('other', 'k2', keys[2] as Buffer)
    expect(cache.get('held', 'k0')).toBeUndefined()
    expect(cache.get('other', 'k2')).toBe(keys[2])
  })
})
