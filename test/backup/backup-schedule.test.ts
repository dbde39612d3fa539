import {
  createReadStream,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Cron } from 'croner'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import type { ScheduledTarget } from '../../src/config-backup.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { MasterKeySet } from '../../src/crypto/master-key-set.js'
import { Metrics } from '../../src/metrics/prometheus.js'
import { createBackup } from '../../src/modules/backup/backup-create.js'
import type { BackupLocation } from '../../src/modules/backup/backup-file.js'
import {
  backupName,
  type ScheduleOptions,
  scheduleBackups,
  slotOf,
} from '../../src/modules/backup/backup-schedule.js'
import { claimSlot, scheduleState } from '../../src/modules/backup/backup-schedule.repo.js'
import { verifyBackup } from '../../src/modules/backup/backup-verify.js'
import type { Store } from '../../src/store/db.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import { secondStore, testScratch, verifyCheck } from '../helpers/backup.js'
import { startS3Server, type TestS3Server } from '../helpers/s3.js'
import { testDialect } from '../helpers/store.js'

/**
 * Scheduled backups (issue 22, part 2): each slot is taken by exactly one node, the target keeps
 * the newest backups, nothing starts while draining, a shutdown stops a running backup, a
 * failure is counted and releases the slot, and /metrics shows the outcome.
 */

const dir = mkdtempSync(join(tmpdir(), 'coffer-schedule-'))
const masterKey = MasterKey.generate()
const keys = new MasterKeySet(masterKey)
let t: TestApp
let blobStore: FsBlobStore
let sqliteFile: string | undefined
/** A store per node (each node of a cluster has its own connections). */
const nodes: Store[] = []

beforeAll(async () => {
  blobStore = new FsBlobStore(join(dir, 'blobs'))
  sqliteFile = testDialect === 'sqlite' ? join(dir, 'coffer.db') : undefined
  t = await buildTestApp({ masterKey, blobStore, ...(sqliteFile ? { sqliteFile } : {}) })
  for (let i = 0; i < 2; i++) nodes.push(await secondStore(t.deps.store, sqliteFile))
}, 60_000)

afterAll(async () => {
  for (const n of nodes) await n.close()
  await t?.close()
  rmSync(dir, { recursive: true, force: true })
})

/** A real backup of the test database, its snapshot on a store of its own. */
async function realBackup(location: BackupLocation, signal: AbortSignal) {
  const snapshotStore = await secondStore(t.deps.store, sqliteFile)
  try {
    return await createBackup({
      snapshotStore,
      live: t.deps.store.db,
      blobStore,
      masterKey,
      location,
      s3: undefined,
      signal,
    })
  } finally {
    await snapshotStore.close()
  }
}

const logs: string[] = []
function node(i: number, target: ScheduledTarget, extra: Partial<ScheduleOptions> = {}) {
  return scheduleBackups({
    // Never fires by itself here (tests run the slots): 1 January, 00:00.
    cron: '0 0 1 1 *',
    target,
    keep: 3,
    s3: undefined,
    db: (nodes[i] as Store).db,
    run: realBackup,
    draining: () => false,
    log: (obj, msg) => logs.push(`${msg} ${JSON.stringify(obj)}`),
    ...extra,
  })
}

let slotSeq = 0
/** Slots in increasing order across the file (the row keeps the last one claimed). */
const nextSlot = () => new Date(Date.UTC(2031, 0, 1, 0, slotSeq++))

const folder = (name: string): ScheduledTarget => {
  const path = join(dir, name)
  mkdirSync(path, { recursive: true })
  return { kind: 'folder', path }
}

describe('scheduled backups', () => {
  it('two nodes at the same slot: one writes the backup, the other skips; it verifies', async () => {
    const target = folder('one-slot')
    const [a, b] = [node(0, target), node(1, target)]
    const slot = nextSlot()
    const outcomes = await Promise.all([a.runSlot(slot), b.runSlot(slot)])
    expect(outcomes.sort()).toEqual(['ok', 'taken'])
    // The same slot again (a node whose clock fired late): nobody writes it twice.
    expect(await Promise.all([a.runSlot(slot), b.runSlot(slot)])).toEqual(['taken', 'taken'])
    const files = readdirSync(target.kind === 'folder' ? target.path : '')
    expect(files).toEqual([backupName(slot)])
    const path = join((target as { path: string }).path, backupName(slot))
    const report = await verifyBackup(
      createReadStream(path),
      keys,
      testScratch(t.deps.store),
      verifyCheck(keys),
    )
    expect(report.ok).toBe(true)
    await Promise.all([a.stop(), b.stop()])
  }, 60_000)

  it('keeps the newest backups and never touches other files', async () => {
    const target = folder('kept') as { kind: 'folder'; path: string }
    writeFileSync(join(target.path, 'notes.txt'), 'mine')
    const a = node(0, target, { keep: 2 })
    const slots = [nextSlot(), nextSlot(), nextSlot(), nextSlot()]
    for (const slot of slots) expect(await a.runSlot(slot)).toBe('ok')
    expect(readdirSync(target.path).sort()).toEqual(
      ['notes.txt', backupName(slots[2] as Date), backupName(slots[3] as Date)].sort(),
    )
    await a.stop()
  }, 60_000)

  it('starts nothing while the node drains', async () => {
    const target = folder('draining') as { kind: 'folder'; path: string }
    const a = node(0, target, { draining: () => true })
    expect(await a.runSlot(nextSlot())).toBe('skipped')
    expect(readdirSync(target.path)).toEqual([])
    await a.stop()
  })

  it('a failure is counted, shown in /metrics, and frees the next slot for any node', async () => {
    const target = folder('failing')
    const failing = node(0, target, {
      run: async () => {
        throw new Error('disk on fire')
      },
    })
    const before = (await failing.freshStats()).failures
    expect(await failing.runSlot(nextSlot())).toBe('failed')
    await failing.refresh()
    expect(failing.stats().failures).toBe(before + 1)
    const other = node(1, target)
    expect(await other.runSlot(nextSlot())).toBe('ok')
    const metrics = new Metrics()
    metrics.watchBackups(() => other.freshStats())
    await other.refresh()
    const text = await metrics.text()
    expect(text).toMatch(/coffer_backup_failures \d+/)
    expect(text).toMatch(/coffer_backup_last_size_bytes \d{3,}/)
    const at = Number(/coffer_backup_last_success_timestamp_seconds (\d+(\.\d+)?)/.exec(text)?.[1])
    expect(Math.abs(at - Date.now() / 1000)).toBeLessThan(60)
    await Promise.all([failing.stop(), other.stop()])
  }, 60_000)

  it('a live lease holds the next slot; an expired one lets another node take it', async () => {
    const target = folder('lease')
    let release: () => void = () => {}
    const slow = node(0, target, {
      leaseMs: 400,
      run: (location, signal) =>
        new Promise((resolve, reject) => {
          release = () => resolve(realBackup(location, signal))
          signal.addEventListener('abort', () => reject(signal.reason))
        }),
    })
    const first = slow.runSlot(nextSlot())
    await new Promise((r) => setTimeout(r, 100))
    const other = node(1, target, { leaseMs: 400 })
    // Renewed while it works: the next slot is not free.
    await new Promise((r) => setTimeout(r, 600))
    expect(await other.runSlot(nextSlot())).toBe('taken')
    release()
    expect(await first).toBe('ok')
    expect(await other.runSlot(nextSlot())).toBe('ok')
    // A node that died holding a slot (its lease never renewed again): once the lease lapses,
    // the next slot is free.
    const at = new Date()
    expect(
      await claimSlot((nodes[0] as Store).db, {
        slot: nextSlot().toISOString(),
        holder: 'a node that died',
        now: at.toISOString(),
        leaseUntil: new Date(at.getTime() + 300).toISOString(),
      }),
    ).toBe(true)
    expect(await other.runSlot(nextSlot())).toBe('taken')
    await new Promise((r) => setTimeout(r, 400))
    expect(await other.runSlot(nextSlot())).toBe('ok')
    await Promise.all([slow.stop(), other.stop()])
  }, 60_000)

  it('a shutdown stops a running backup and leaves no partial file', async () => {
    const target = folder('stopped') as { kind: 'folder'; path: string }
    const a = node(0, target, {
      run: async (location, signal) => {
        await new Promise((r) => setTimeout(r, 50))
        signal.throwIfAborted()
        await new Promise((r) => setTimeout(r, 50))
        return realBackup(location, signal)
      },
    })
    const running = a.runSlot(nextSlot())
    await new Promise((r) => setTimeout(r, 70))
    await a.stop()
    expect(await running).toBe('failed')
    expect(readdirSync(target.path)).toEqual([])
  })
})

describe('slots and leases', () => {
  it('a slot is the planned time, not the firing time', () => {
    const cron = new Cron('0 3 * * *', { timezone: 'Etc/UTC' })
    const planned = Date.UTC(2031, 5, 1, 3)
    for (const late of [0, 3, 731, 2500]) {
      expect(slotOf(cron, new Date(planned + late)).toISOString()).toBe('2031-06-01T03:00:00.000Z')
    }
    const everyTen = new Cron('*/10 * * * * *', { timezone: 'Etc/UTC' })
    expect(slotOf(everyTen, new Date(Date.UTC(2031, 5, 1, 3, 0, 10, 20))).toISOString()).toBe(
      '2031-06-01T03:00:10.000Z',
    )
  })

  it('nodes firing late claim the planned slot, once: one backup per slot', async () => {
    await (nodes[0] as Store).db.deleteFrom('backup_schedule').execute()
    const target = folder('firing')
    const runs: string[] = []
    const quick = async (location: BackupLocation) => {
      runs.push(location.kind === 'file' ? location.path : location.key)
      return {
        location: 'x',
        bytes: 1,
        manifest: { backup_id: 'x' },
      } as unknown as Awaited<ReturnType<ScheduleOptions['run']>>
    }
    // Every even second; both nodes' timers fire in this process.
    const everyTwo = { cron: '*/2 * * * * *', run: quick }
    const [a, b] = [node(0, target, everyTwo), node(1, target, everyTwo)]
    await new Promise((r) => setTimeout(r, 2500))
    // A busy process: the event loop stalls across a planned second, both crons fire ~1 s late
    // (croner's currentRun() is then the odd second after it).
    while (Date.now() % 2000 < 1700) await new Promise((r) => setTimeout(r, 20))
    const stallUntil = Date.now() + 1400
    while (Date.now() < stallUntil) {
      // busy
    }
    await new Promise((r) => setTimeout(r, 1500))
    await Promise.all([a.stop(), b.stop()])
    expect(runs.length).toBeGreaterThanOrEqual(2)
    expect(new Set(runs).size).toBe(runs.length)
    const seconds = runs.map((r) => Number(/T\d{4}(\d\d)Z/.exec(r)?.[1]))
    expect(seconds.every((s) => s % 2 === 0)).toBe(true)
    const row = await scheduleState((nodes[0] as Store).db)
    expect(row?.slot).toMatch(/T\d\d:\d\d:\d[02468]\.000Z$/)
    // Later tests claim slots in 2031.
  }, 30_000)

  it('a lapsed lease stops the running backup; a lease taken over does too', async () => {
    const target = folder('lapsed')
    const reasons: string[] = []
    const held = (i: number) =>
      node(i, target, {
        leaseMs: 400,
        // A backup that would finish well after its lease, unless stopped.
        run: (_location, signal) =>
          new Promise((resolve, reject) => {
            const done = setTimeout(
              () => resolve({ location: 'x', bytes: 1, manifest: { backup_id: 'x' } } as never),
              4000,
            )
            signal.addEventListener('abort', () => {
              clearTimeout(done)
              reasons.push(String((signal.reason as Error).message))
              reject(signal.reason)
            })
          }),
      })
    const db = (nodes[0] as Store).db
    // Lapsed (its node stalled past it), nobody took over yet: the next renewal stops it.
    const a = held(0)
    const first = a.runSlot(nextSlot())
    await new Promise((r) => setTimeout(r, 150))
    await db
      .updateTable('backup_schedule')
      .set({ lease_until: new Date(0).toISOString() })
      .execute()
    expect(await first).toBe('failed')
    expect(reasons.at(-1)).toMatch(/lease lapsed/)
    // Taken over by another node after a lapse: stopped too.
    const second = a.runSlot(nextSlot())
    await new Promise((r) => setTimeout(r, 150))
    await db
      .updateTable('backup_schedule')
      .set({ lease_until: new Date(0).toISOString() })
      .execute()
    expect(
      await claimSlot(db, {
        slot: nextSlot().toISOString(),
        holder: 'another node',
        now: new Date().toISOString(),
        leaseUntil: new Date(Date.now() + 60_000).toISOString(),
      }),
    ).toBe(true)
    expect(await second).toBe('failed')
    expect(reasons.at(-1)).toMatch(/another node took it over/)
    await db.updateTable('backup_schedule').set({ holder: null, lease_until: null }).execute()
    await a.stop()
  }, 30_000)
})

describe('scheduled backups to S3', () => {
  let s3: TestS3Server
  beforeAll(async () => {
    s3 = await startS3Server('coffer-backups')
  })
  afterAll(async () => {
    await s3?.close()
  })

  it('writes under the prefix and keeps the newest', async () => {
    const s3Config = {
      endpoint: s3.endpoint,
      region: s3.region,
      bucket: s3.bucket,
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
      forcePathStyle: true,
      prefix: '',
      connectTimeoutMs: 5000,
      requestTimeoutMs: 10_000,
      deadlineMs: 15_000,
    }
    const target: ScheduledTarget = { kind: 's3', bucket: s3.bucket, prefix: 'nightly/coffer' }
    const a = node(0, target, {
      keep: 1,
      s3: s3Config,
      run: async (location, signal) => {
        const snapshotStore = await secondStore(t.deps.store, sqliteFile)
        try {
          return await createBackup({
            snapshotStore,
            live: t.deps.store.db,
            blobStore,
            masterKey,
            location,
            s3: s3Config,
            signal,
          })
        } finally {
          await snapshotStore.close()
        }
      },
    })
    const slots = [nextSlot(), nextSlot()]
    for (const slot of slots) expect(await a.runSlot(slot)).toBe('ok')
    const { S3BlobStore } = await import('../../src/blob/s3-blob-store.js')
    const store = new S3BlobStore({ ...s3Config, prefix: '' })
    const keysFound: string[] = []
    for await (const o of store.list('nightly/')) keysFound.push(o.key)
    store.close()
    expect(keysFound).toEqual([`nightly/coffer/${backupName(slots[1] as Date)}`])
    await a.stop()
  }, 60_000)
})
