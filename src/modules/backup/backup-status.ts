import { Cron } from 'croner'
import {
  type BackupScheduleConfig,
  DEFAULT_BACKUP_KEEP,
  type ScheduledTarget,
} from '../../config-backup.js'
import type { Executor } from '../../store/executor.js'
import { scheduleState } from './backup-schedule.repo.js'

/** The longest failure message shown (the row keeps 1,000 characters). */
export const STATUS_MESSAGE_CHARS = 500

export interface BackupStatus {
  schedule: string | null
  target: string | null
  keep: number
  next_run_at: string | null
  running: boolean
  last_success: { at: string; size_bytes: number; location: string | null } | null
  last_failure: { at: string; message: string } | null
  failures: number
}

export function describeTarget(target: ScheduledTarget | undefined): string | null {
  if (!target) return null
  if (target.kind === 'folder') return target.path
  return `s3://${target.bucket}/${target.prefix}`
}

/**
 * What an error message may show to a reader of the status: credentials in a URL
 * (`scheme://user:password@`) masked, and at most STATUS_MESSAGE_CHARS characters. Messages
 * are Coffer's own and the drivers' (a path, a bucket, an S3 or SQL error code); none carries a
 * key, but a database or endpoint URL with a password could.
 */
export function safeMessage(text: string): string {
  const masked = text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]+@/gi, '$1***@')
  return masked.length > STATUS_MESSAGE_CHARS
    ? `${masked.slice(0, STATUS_MESSAGE_CHARS - 1)}…`
    : masked
}

/**
 * The deployment's scheduled backups (GET /v1/backups/status, the console's Backups page): the
 * settings of this node, the next planned slot, and the last outcome of any node (the schedule's
 * row, shared by the cluster).
 */
export async function backupStatus(
  db: Executor,
  config: BackupScheduleConfig | undefined,
  now: Date,
): Promise<BackupStatus> {
  const row = await scheduleState(db)
  const schedule = config?.schedule ?? null
  const next = schedule ? new Cron(schedule, { timezone: 'Etc/UTC' }).nextRun(now) : null
  return {
    schedule,
    target: describeTarget(config?.target),
    keep: config?.keep ?? DEFAULT_BACKUP_KEEP,
    next_run_at: next ? next.toISOString() : null,
    running: Boolean(row?.holder && row.lease_until && row.lease_until >= now.toISOString()),
    last_success: row?.last_success_at
      ? {
          at: row.last_success_at,
          size_bytes: Number(row.last_size ?? 0),
          location: row.last_target,
        }
      : null,
    last_failure: row?.last_failure_at
      ? { at: row.last_failure_at, message: safeMessage(row.last_error ?? '') }
      : null,
    failures: Number(row?.failures ?? 0),
  }
}
