import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { WalGroupSync } from './wal-sync.js'

/** A datasync the test ends by hand, recording each start. */
function controlled() {
  const started: { end: () => void; fail: (e: Error) => void }[] = []
  const datasync = () =>
    new Promise<void>((resolve, reject) => started.push({ end: resolve, fail: reject }))
  return { started, datasync }
}

const tick = () => new Promise((r) => setImmediate(r))

describe('WalGroupSync', () => {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-wal-sync-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('callers before a start share it; one who calls while it runs waits for a later one', async () => {
    const { started, datasync } = controlled()
    const wal = new WalGroupSync('/nowhere-wal', datasync, 1)
    const answered: string[] = []
    void wal.sync().then(() => answered.push('a'))
    expect(started).toHaveLength(1)
    // Its commit came after the running sync started: that sync may not cover it.
    void wal.sync().then(() => answered.push('b'))
    void wal.sync().then(() => answered.push('c'))
    expect(started).toHaveLength(1)
    started[0]?.end()
    await tick()
    expect(answered).toEqual(['a'])
    // b and c share the next one, started only now.
    expect(started).toHaveLength(2)
    started[1]?.end()
    await tick()
    expect(answered).toEqual(['a', 'b', 'c'])
  })

  it('runs up to maxInFlight at once, each for the callers before its own start', async () => {
    const { started, datasync } = controlled()
    const wal = new WalGroupSync('/nowhere-wal', datasync, 2)
    const answered: string[] = []
    void wal.sync().then(() => answered.push('a'))
    void wal.sync().then(() => answered.push('b'))
    void wal.sync().then(() => answered.push('c'))
    expect(started).toHaveLength(2)
    started[1]?.end()
    await tick()
    expect(answered).toEqual(['b'])
    expect(started).toHaveLength(3)
    started[2]?.end()
    started[0]?.end()
    await tick()
    expect(answered.sort()).toEqual(['a', 'b', 'c'])
  })

  it('a failed sync fails exactly its callers; the next ones get their own', async () => {
    const { started, datasync } = controlled()
    const wal = new WalGroupSync('/nowhere-wal', datasync, 1)
    const first = wal.sync()
    const second = wal.sync()
    started[0]?.fail(Object.assign(new Error('EIO'), { code: 'EIO' }))
    await expect(first).rejects.toMatchObject({ code: 'EIO' })
    started[1]?.end()
    await expect(second).resolves.toBeUndefined()
  })

  it('syncs a real file, and a WAL that is not there has nothing to sync', async () => {
    const file = join(dir, 'x.db-wal')
    writeFileSync(file, 'frames')
    await expect(new WalGroupSync(file).sync()).resolves.toBeUndefined()
    await expect(new WalGroupSync(join(dir, 'missing-wal')).sync()).resolves.toBeUndefined()
  })
})
