import { describe, expect, it } from 'vitest'
import { CountBuffer } from './count-buffer.js'
import type { Increment } from './metering.repo.js'

const inc = (accountId: string, n: number, category = 'document_read'): Increment => ({
  accountId,
  day: '2030-01-01',
  category,
  n,
})

describe('CountBuffer', () => {
  it('merges increments by key and writes them sorted, in one batch', async () => {
    const writes: Increment[][] = []
    const buffer = new CountBuffer(
      async (b) => void writes.push(b),
      60_000,
      () => {},
    )
    buffer.add(inc('b', 1))
    buffer.add(inc('a', 2))
    buffer.add(inc('b', 3))
    buffer.add(inc('a', 1, 'user_read'))
    expect(buffer.pendingFor('b', '2030-01-01')).toBe(4)
    await buffer.flush()
    expect(writes).toEqual([[inc('a', 2), inc('a', 1, 'user_read'), inc('b', 4)]])
    expect(buffer.pendingFor('b', '2030-01-01')).toBe(0)
    await buffer.flush()
    expect(writes).toHaveLength(1)
  })

  it('writes by itself within the interval', async () => {
    const writes: Increment[][] = []
    const buffer = new CountBuffer(
      async (b) => void writes.push(b),
      20,
      () => {},
    )
    buffer.add(inc('a', 1))
    await new Promise((r) => setTimeout(r, 100))
    expect(writes).toEqual([[inc('a', 1)]])
  })

  it('keeps a batch that could not be stored, counts it as pending, and stores it later', async () => {
    let fail = true
    const writes: Increment[][] = []
    const errors: unknown[] = []
    const buffer = new CountBuffer(
      async (b) => {
        if (fail) throw new Error('database unavailable')
        writes.push(b)
      },
      60_000,
      (e) => errors.push(e),
    )
    buffer.add(inc('a', 2))
    await expect(buffer.flush()).rejects.toThrow('database unavailable')
    buffer.add(inc('a', 1))
    expect(buffer.pendingFor('a', '2030-01-01')).toBe(3)
    fail = false
    await buffer.flush()
    expect(writes).toEqual([[inc('a', 3)]])
  })

  it('counts the batch being written as pending until it is stored', async () => {
    let release: () => void = () => {}
    const buffer = new CountBuffer(
      () => new Promise<void>((r) => (release = r)),
      60_000,
      () => {},
    )
    buffer.add(inc('a', 5))
    const flushing = buffer.flush()
    buffer.add(inc('a', 1))
    expect(buffer.pendingFor('a', '2030-01-01')).toBe(6)
    release()
    await flushing
    expect(buffer.pendingFor('a', '2030-01-01')).toBe(1)
  })
})
