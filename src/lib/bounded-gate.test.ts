import { describe, expect, it } from 'vitest'
import { BoundedGate, GateFullError } from './bounded-gate.js'

function deferred() {
  let resolve!: () => void
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

describe('BoundedGate', () => {
  it('runs at most maxRunning at once, queues up to maxQueued, refuses the next', async () => {
    const gate = new BoundedGate(2, 1)
    const blockers = [deferred(), deferred(), deferred()]
    const order: number[] = []
    const tasks = blockers.map((b, i) =>
      gate.run(async () => {
        order.push(i)
        await b.promise
        return i
      }),
    )
    await Promise.resolve()
    expect(gate.load()).toEqual({ running: 2, queued: 1 })
    expect(order).toEqual([0, 1])
    await expect(gate.run(async () => 'late')).rejects.toBeInstanceOf(GateFullError)
    blockers[0]?.resolve()
    await tasks[0]
    await Promise.resolve()
    // The freed slot went to the queued task, in order; the count never exceeded two.
    expect(order).toEqual([0, 1, 2])
    expect(gate.load()).toEqual({ running: 2, queued: 0 })
    blockers[1]?.resolve()
    blockers[2]?.resolve()
    expect(await Promise.all(tasks)).toEqual([0, 1, 2])
    expect(gate.load()).toEqual({ running: 0, queued: 0 })
  })

  it('frees the slot when a task fails', async () => {
    const gate = new BoundedGate(1, 0)
    await expect(gate.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom')
    expect(await gate.run(async () => 'ok')).toBe('ok')
  })

  it('takes a waiting task whose signal aborts out of the queue, the slot going to the next', async () => {
    const gate = new BoundedGate(1, 2)
    const blocker = deferred()
    const first = gate.run(() => blocker.promise)
    const controller = new AbortController()
    let ranLeaver = false
    const leaver = gate.run(async () => {
      ranLeaver = true
    }, controller.signal)
    const next = gate.run(async () => 'next')
    await Promise.resolve()
    expect(gate.load()).toEqual({ running: 1, queued: 2 })
    controller.abort(new Error('gave up'))
    await expect(leaver).rejects.toThrow('gave up')
    expect(gate.load()).toEqual({ running: 1, queued: 1 })
    blocker.resolve()
    await first
    expect(await next).toBe('next')
    expect(ranLeaver).toBe(false)
    expect(gate.load()).toEqual({ running: 0, queued: 0 })
  })

  it('refuses a task whose signal has already aborted', async () => {
    const gate = new BoundedGate(1, 1)
    await expect(gate.run(async () => 'x', AbortSignal.abort(new Error('late')))).rejects.toThrow(
      'late',
    )
    expect(gate.load()).toEqual({ running: 0, queued: 0 })
  })

  it('rejects nonsensical sizes', () => {
    expect(() => new BoundedGate(0, 1)).toThrow(RangeError)
    expect(() => new BoundedGate(1, -1)).toThrow(RangeError)
  })
})
