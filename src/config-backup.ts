import { resolve } from 'node:path'
import { Cron } from 'croner'

/**
 * Scheduled backups (COFFER_BACKUP_*, issue 22 part 2): read and checked for syntax here; the
 * schedule runs in `coffer serve` (modules/backup/backup-schedule.ts).
 */

/** Where scheduled backups go: a folder, or a prefix in a bucket of the configured S3 store. */
export type ScheduledTarget =
  | { kind: 'folder'; path: string }
  | { kind: 's3'; bucket: string; prefix: string }

export interface BackupScheduleConfig {
  /** A cron expression in UTC (croner syntax); undefined: no scheduled backups. */
  schedule: string | undefined
  target: ScheduledTarget | undefined
  /** The newest this many scheduled backups are kept; older ones are deleted after a success. */
  keep: number
}

export const DEFAULT_BACKUP_KEEP = 7
export const MAX_BACKUP_KEEP = 10_000
/** Slots closer than this are refused: a backup reads the whole database. */
export const MIN_BACKUP_INTERVAL_SECONDS = 60

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/

type Int = (name: string, fallback: number, min: number, max: number) => number

export function backupSettings(
  env: NodeJS.ProcessEnv,
  read: { int: Int },
  storage: { s3Configured: boolean; databaseUrl: string },
  problems: string[],
): BackupScheduleConfig {
  const schedule = env.COFFER_BACKUP_SCHEDULE?.trim() || undefined
  const rawTarget = env.COFFER_BACKUP_TARGET?.trim() || undefined
  const keepGiven = Boolean(env.COFFER_BACKUP_KEEP?.trim())
  const keep = read.int('COFFER_BACKUP_KEEP', DEFAULT_BACKUP_KEEP, 1, MAX_BACKUP_KEEP)
  if (!schedule) {
    if (rawTarget || keepGiven) {
      problems.push(
        'COFFER_BACKUP_TARGET and COFFER_BACKUP_KEEP apply only with COFFER_BACKUP_SCHEDULE',
      )
    }
    return { schedule: undefined, target: undefined, keep }
  }
  const interval = cronInterval(schedule)
  if (typeof interval === 'string') {
    problems.push(
      `COFFER_BACKUP_SCHEDULE must be a cron expression (UTC), e.g. "0 3 * * *": ${interval}`,
    )
  } else if (interval < MIN_BACKUP_INTERVAL_SECONDS) {
    problems.push(
      `COFFER_BACKUP_SCHEDULE fires every ${interval} s: scheduled backups may be at most once a minute`,
    )
  }
  if (storage.databaseUrl === ':memory:') {
    problems.push('COFFER_BACKUP_SCHEDULE needs a database file or PostgreSQL, not :memory:')
  }
  if (!rawTarget) {
    problems.push(
      'COFFER_BACKUP_SCHEDULE needs COFFER_BACKUP_TARGET (a folder or s3://bucket/prefix)',
    )
    return { schedule, target: undefined, keep }
  }
  return { schedule, target: scheduledTarget(rawTarget, storage.s3Configured, problems), keep }
}

/** Seconds between the schedule's next two slots, or why the expression does not parse. */
function cronInterval(expression: string): number | string {
  try {
    const job = new Cron(expression, { paused: true, timezone: 'Etc/UTC' })
    const [first, second] = job.nextRuns(2)
    job.stop()
    if (!first || !second) return 'it never fires'
    return (second.getTime() - first.getTime()) / 1000
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}

function scheduledTarget(raw: string, s3Configured: boolean, problems: string[]): ScheduledTarget {
  if (!raw.startsWith('s3://')) return { kind: 'folder', path: resolve(raw) }
  const rest = raw.slice('s3://'.length)
  const slash = rest.indexOf('/')
  const bucket = slash < 0 ? rest : rest.slice(0, slash)
  const prefix = (slash < 0 ? '' : rest.slice(slash + 1)).replace(/^\/+|\/+$/g, '')
  if (!BUCKET_NAME.test(bucket) || bucket.includes('..')) {
    problems.push('COFFER_BACKUP_TARGET s3://<bucket>/<prefix> needs a bucket name')
  }
  if (prefix.split('/').some((s) => s === '.' || s === '..') || prefix.includes('//')) {
    problems.push(
      'COFFER_BACKUP_TARGET s3://<bucket>/<prefix>: the prefix has an empty, . or .. part',
    )
  }
  if (!s3Configured) {
    problems.push(
      'COFFER_BACKUP_TARGET s3://… uses the configured S3 store: set COFFER_BLOB_STORE=s3 and its COFFER_S3_* settings',
    )
  }
  return { kind: 's3', bucket, prefix }
}
