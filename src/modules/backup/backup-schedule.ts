import { randomBytes } from 'node:crypto'
import { readdir, rm } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { Cron } from 'croner'
import type { ScheduledTarget } from '../../config-backup.js'
import type { S3Config } from '../../config-storage.js'
import { type Meter, noopMeter } from '../../metrics/meter.js'
import type { Executor } from '../../store/executor.js'
import type { CreateResult } from './backup-create.js'
import { type BackupLocation, s3StoreFor } from './backup-file.js'
import {
  claimSlot,
  recordFailure,
  recordSuccess,
  renewLease,
  scheduleState,
} from './backup-schedule.repo.js'

/** A node holding a slot renews its lease this often; a lease not renewed for LEASE_MS lapses. */
export const LEASE_MS = 120_000
const RENEW_MS = LEASE_MS / 4
/** Longest a shutdown waits for a stopped backup to clean up (its S3 calls have deadlines). */
export const STOP_WAIT_MS = 10_000
/** A scrape reads the schedule's row at most this often. */
const STATS_TTL_MS = 1000

/** `coffer-backup-20250101T030000Z.cbk`: the slot's UTC time, so names sort by age. */
const NAME = /^coffer-backup-\d{8}T\d{6}Z\.cbk$/

export function backupName(slot: Date): string {
  const compact = slot
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '')
  return `coffer-backup-${compact}.cbk`
}

/** What /metrics shows: the schedule's last outcome, read from the database (every node). */
export interface BackupStats {
  /** Unix seconds of the last good backup (any node's); undefined: none yet. */
  lastSuccessAt: number | undefined
  lastSizeBytes: number | undefined
  /** Failed scheduled backups, counted by every node in the row. */
  failures: number
}

export type SlotOutcome = 'ok' | 'failed' | 'skipped' | 'taken'

export interface ScheduleOptions {
  cron: string
  target: ScheduledTarget
  keep: number
  s3: S3Config | undefined
  /** The node's store: the schedule's row. */
  db: Executor
  /** Writes one backup (backup-create.ts on a snapshot store of its own). */
  run(location: BackupLocation, signal: AbortSignal): Promise<CreateResult>
  /** True while the node drains or shuts down: no backup starts then. */
  draining(): boolean
  log(obj: object, msg: string): void
  meter?: Meter
  now?: () => Date
  leaseMs?: number
}

export interface BackupScheduler {
  /** Runs one slot as the cron would (tests; the cron calls it). */
  runSlot(slot: Date): Promise<SlotOutcome>
  stats(): BackupStats
  /** Refreshes stats from the database. */
  refresh(): Promise<void>
  /** Stats read from the database at most once a second (what a scrape shows, on every node). */
  freshStats(): Promise<BackupStats>
  /** Stops the cron; a backup in progress is stopped (its partial output removed) and awaited. */
  stop(): Promise<void>
}

/**
 * Scheduled backups in `coffer serve` (decisions 238). Every node runs the cron; at each slot
 * each node tries to claim it in the database (backup-schedule.repo.ts): one wins and writes
 * the backup while renewing its lease, the others skip. After a good backup the target keeps its
 * newest `keep` backups. Nothing starts while the node drains; shutdown stops a running one.
 */
export function scheduleBackups(options: ScheduleOptions): BackupScheduler {
  const now = options.now ?? (() => new Date())
  const meter = options.meter ?? noopMeter
  const leaseMs = options.leaseMs ?? LEASE_MS
  const node = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
  let stats: BackupStats = { lastSuccessAt: undefined, lastSizeBytes: undefined, failures: 0 }
  let running: Promise<SlotOutcome> | undefined
  let stopped = false
  const abort = new AbortController()

  const refresh = async () => {
    const row = await scheduleState(options.db)
    if (!row) return
    stats = {
      lastSuccessAt: row.last_success_at ? Date.parse(row.last_success_at) / 1000 : undefined,
      lastSizeBytes: row.last_size === null ? undefined : Number(row.last_size),
      failures: Number(row.failures),
    }
  }

  const runSlot = async (slot: Date): Promise<SlotOutcome> => {
    if (stopped || options.draining()) return 'skipped'
    const at = now()
    const claimed = await claimSlot(options.db, {
      slot: slot.toISOString(),
      holder: node,
      now: at.toISOString(),
      leaseUntil: new Date(at.getTime() + leaseMs).toISOString(),
    }).catch((error: unknown) => {
      options.log({ error: message(error) }, 'scheduled backup: slot not claimed')
      return false
    })
    if (!claimed) {
      await refresh().catch(() => {})
      return 'taken'
    }
    const location = locationOf(options.target, slot)
    // A lease that lapses stops the backup: another node may take the next slot once it has,
    // and two nodes must never write at once (decisions 245).
    const lease = new AbortController()
    let heldUntil = at.getTime() + leaseMs
    const renewEvery = Math.min(RENEW_MS, leaseMs / 4)
    const renew = setInterval(() => {
      const t = now().getTime()
      renewLease(options.db, node, {
        now: new Date(t).toISOString(),
        leaseUntil: new Date(t + leaseMs).toISOString(),
      })
        .then((held) => {
          if (held) heldUntil = t + leaseMs
          else lease.abort(new Error('the backup lease lapsed or another node took it over'))
        })
        .catch((error: unknown) => {
          // The database did not answer: stop before the lease ends unrenewed.
          if (now().getTime() + renewEvery >= heldUntil) {
            lease.abort(
              new Error(`the backup lease could not be renewed in time: ${message(error)}`),
            )
          }
        })
    }, renewEvery)
    renew.unref()
    try {
      const result = await options.run(location, AbortSignal.any([abort.signal, lease.signal]))
      clearInterval(renew)
      await recordSuccess(options.db, node, {
        at: now().toISOString(),
        size: result.bytes,
        target: result.location,
      })
      meter.count('backup_runs', { outcome: 'ok' })
      options.log(
        { backup: result.location, bytes: result.bytes, backup_id: result.manifest.backup_id },
        'scheduled backup written',
      )
      await prune(options, options.target).catch((error: unknown) =>
        options.log({ error: message(error) }, 'scheduled backup: old backups not pruned'),
      )
      await refresh().catch(() => {})
      return 'ok'
    } catch (error) {
      clearInterval(renew)
      meter.count('backup_runs', { outcome: 'failed' })
      options.log({ error: message(error) }, 'scheduled backup failed')
      await recordFailure(options.db, node, { at: now().toISOString(), error: message(error) })
        .then(refresh)
        .catch(() => {})
      return 'failed'
    }
  }

  const job = new Cron(options.cron, { timezone: 'Etc/UTC', protect: true }, async (self) => {
    if (running !== undefined) return
    // The planned time, not croner's firing time (currentRun: a few ms later, different on
    // each node): every node of a cluster claims the same slot.
    const slot = slotOf(self, self.currentRun() ?? now())
    running = runSlot(slot).finally(() => {
      running = undefined
    })
    await running
  })

  let refreshedAt = 0
  let refreshing: Promise<void> | undefined
  // One read serves every gauge of a scrape (they are collected together).
  const freshStats = async () => {
    const t = Date.now()
    if (!refreshing && t - refreshedAt >= STATS_TTL_MS) {
      refreshedAt = t
      refreshing = refresh()
        .catch(() => {})
        .finally(() => {
          refreshing = undefined
        })
    }
    await refreshing
    return stats
  }

  refresh().catch(() => {})
  return {
    freshStats,
    runSlot: (slot) => {
      const run = runSlot(slot)
      running = run.finally(() => {
        running = undefined
      })
      return run
    },
    stats: () => stats,
    refresh,
    async stop() {
      stopped = true
      job.stop()
      abort.abort(new Error('the server is shutting down'))
      let timer: NodeJS.Timeout | undefined
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, STOP_WAIT_MS)
        timer.unref()
      })
      await Promise.race([running?.catch(() => {}), waited])
      clearTimeout(timer)
    },
  }
}

/**
 * The planned time of the run that fired at `firedAt`: the pattern's latest time at or before
 * it (croner fires at the planned second or a little after; at least a second later, or
 * later still when the process was busy). Milliseconds are never part of a slot.
 */
export function slotOf(cron: Cron, firedAt: Date): Date {
  const second = Math.floor(firedAt.getTime() / 1000) * 1000
  // previousRuns answers times strictly before the one given.
  return cron.previousRuns(1, new Date(second + 1000))[0] ?? new Date(second)
}

function locationOf(target: ScheduledTarget, slot: Date): BackupLocation {
  const name = backupName(slot)
  return target.kind === 'folder'
    ? { kind: 'file', path: join(target.path, name) }
    : { kind: 's3', bucket: target.bucket, key: target.prefix ? `${target.prefix}/${name}` : name }
}

/** Deletes the target's scheduled backups beyond the newest `keep` (only names it made). */
async function prune(options: ScheduleOptions, target: ScheduledTarget): Promise<void> {
  if (target.kind === 'folder') {
    const names = (await readdir(target.path)).filter((n) => NAME.test(n)).sort()
    for (const name of names.slice(0, Math.max(0, names.length - options.keep))) {
      await rm(join(target.path, name), { force: true })
    }
    return
  }
  const store = s3StoreFor(options.s3, target.bucket)
  try {
    const prefix = target.prefix ? `${target.prefix}/` : ''
    const keys: string[] = []
    for await (const object of store.list(prefix)) {
      const name = object.key.slice(prefix.length)
      if (NAME.test(name)) keys.push(object.key)
    }
    keys.sort()
    for (const key of keys.slice(0, Math.max(0, keys.length - options.keep))) {
      await store.delete(key)
    }
  } finally {
    store.close()
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
