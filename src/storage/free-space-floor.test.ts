import { describe, expect, it } from 'vitest'
import type { Meter } from '../metrics/meter.js'
import { type FolderSpace, FreeSpaceFloor, type FsSpace, floorBytes } from './free-space-floor.js'

const GiB = 1024 ** 3

/** A file system of `total` bytes in 4 KiB blocks with `free` bytes available. */
const space = (total: number, free: number): FsSpace => ({
  bsize: 4096,
  blocks: total / 4096,
  bavail: free / 4096,
})

function floorOver(disk: { space: FsSpace | undefined }, minFreeBytes: number | undefined) {
  const changes: [boolean, FolderSpace[]][] = []
  let statfsCalls = 0
  let refusals = 0
  const meter: Meter = { count: () => refusals++, observe: () => {} }
  const floor = new FreeSpaceFloor({
    paths: ['/data'],
    minFreeBytes,
    refreshMs: 0,
    statfs: async () => {
      statfsCalls++
      if (!disk.space) throw Object.assign(new Error('gone'), { code: 'ENOENT' })
      return disk.space
    },
    meter,
    onChange: (refusing, folders) => changes.push([refusing, folders]),
  })
  return { floor, changes, calls: () => statfsCalls, refusals: () => refusals }
}

describe('floorBytes', () => {
  it('defaults to 5 % of the file system, at most 1 GiB', () => {
    expect(floorBytes(space(4096 * 1000, 0), undefined)).toBe(4096 * 50)
    // 20 GiB: 5 % is exactly 1 GiB; above it the 1 GiB cap holds.
    expect(floorBytes(space(20 * GiB, 0), undefined)).toBe(GiB)
    expect(floorBytes(space(400 * GiB, 0), undefined)).toBe(GiB)
  })

  it('takes COFFER_MIN_FREE_BYTES as given', () => {
    expect(floorBytes(space(400 * GiB, 0), 12_345)).toBe(12_345)
  })
})

describe('FreeSpaceFloor', () => {
  it('refuses under the floor, not at it, and tells each change once', async () => {
    const disk = { space: space(4096 * 1000, 4096 * 100) }
    const { floor, changes } = floorOver(disk, 4096 * 100)
    expect(await floor.refusing()).toBe(false)
    disk.space = space(4096 * 1000, 4096 * 99)
    expect(await floor.refusing()).toBe(true)
    expect(await floor.refusing()).toBe(true)
    disk.space = space(4096 * 1000, 4096 * 100)
    expect(await floor.refusing()).toBe(false)
    expect(changes.map(([refusing]) => refusing)).toEqual([true, false])
    expect(changes[0]?.[1]).toEqual([
      { path: '/data', freeBytes: 4096 * 99, floorBytes: 4096 * 100 },
    ])
  })

  it('reads the file system once per interval', async () => {
    const disk = { space: space(4096 * 1000, 4096 * 500) }
    let calls = 0
    const floor = new FreeSpaceFloor({
      paths: ['/data'],
      minFreeBytes: 4096,
      refreshMs: 60_000,
      statfs: async () => {
        calls++
        return disk.space
      },
      onChange: () => {},
    })
    await Promise.all([floor.refusing(), floor.refusing(), floor.refusing()])
    await floor.refusing()
    expect(calls).toBe(1)
    await floor.refresh()
    expect(calls).toBe(2)
  })

  it('is off at 0 or with nothing to watch, and never reads then', async () => {
    const disk = { space: space(4096 * 1000, 0) }
    const off = floorOver(disk, 0)
    expect(off.floor.enabled).toBe(false)
    expect(await off.floor.refusing()).toBe(false)
    expect(off.calls()).toBe(0)
    expect(FreeSpaceFloor.disabled().enabled).toBe(false)
  })

  it('leaves a folder it cannot read to the readiness check', async () => {
    const disk: { space: FsSpace | undefined } = { space: undefined }
    const { floor } = floorOver(disk, 4096)
    expect(await floor.refusing()).toBe(false)
    expect(floor.folders).toEqual([])
  })

  it('counts each refusal through the meter', () => {
    const { floor, refusals } = floorOver({ space: space(4096, 0) }, 1)
    floor.countRefusal()
    expect(refusals()).toBe(1)
  })
})
