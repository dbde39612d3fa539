import { describe, expect, it } from 'vitest'
import { GroupCommit } from './group-commit.js'
import type { Increment } from './metering.repo.js'

const inc = (accountId: string, n: number, category = 'document_read'): Increment => ({
  accountId,
  day: '2030-01-01',
  category,
  n,
})

describe('GroupCommit', () => {
  it('gathers concurrent increments into one write, merged by key and sorted', async () => {
    const writes: Increment[][] = []
    const commit = new GroupCommit(async (batch) => {
      writes.push(batch)
    })
    await Promise.all([
      commit.add(inc('b', 1)),
      commit.add(inc('a', 2)),
      commit.add(inc('b', 3)),
      commit.add(inc('a', 1, 'user_read')),
    ])
    expect(writes).toEqual([[inc('a', 2), inc('a', 1, 'user_read'), inc('b', 4)]])
  })

  it('settles a request only once its batch is stored; later increments form the next batch', async () => {
    const writes: Increment[][] = []
    let release: () => void = () => {}
    const commit = new GroupCommit(async (batch) => {
      writes.push(batch)
      if (writes.length === 1) await new Promise<void>((r) => (release = r))
    })
    let firstDone = false
    const first = commit.add(inc('a', 1)).then(() => (firstDone = true))
    await new Promise((r) => setImmediate(r))
    const second = commit.add(inc('a', 2))
    await new Promise((r) => setImmediate(r))
    expect(firstDone).toBe(false)
    release()
    await Promise.all([first, second])
    expect(writes).toEqual([[inc('a', 1)], [inc('a', 2)]])
  })

  it('fails every request of a failed batch, and the next batch is written afresh', async () => {
    let fail = true
    const writes: Increment[][] = []
    const commit = new GroupCommit(async (batch) => {
      if (fail) throw new Error('database unavailable')
      writes.push(batch)
    })
    const results = await Promise.allSettled([commit.add(inc('a', 1)), commit.add(inc('b', 1))])
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected'])
    fail = false
    await commit.add(inc('c', 1))
    // The failed batch's counts are gone with their requests: only the new one is written.
    expect(writes).toEqual([[inc('c', 1)]])
  })
})
