import { Type } from 'typebox'
import { responses, success } from '../../http/schemas.js'

const At = Type.String({
  description: 'UTC time (ISO 8601)',
  examples: ['2026-11-26T03:00:04.120Z'],
})

export const BackupStatusResponse = responses(
  success({
    backup: Type.Object({
      schedule: Type.Union([Type.String(), Type.Null()], {
        description: 'COFFER_BACKUP_SCHEDULE (cron, UTC); null: no scheduled backups',
      }),
      target: Type.Union([Type.String(), Type.Null()], {
        description: 'COFFER_BACKUP_TARGET: a folder, or s3://bucket/prefix',
      }),
      keep: Type.Integer({ minimum: 1, description: 'COFFER_BACKUP_KEEP: newest backups kept' }),
      next_run_at: Type.Union([At, Type.Null()], {
        description: 'The next planned slot; null without a schedule',
      }),
      running: Type.Boolean({ description: 'A node holds an unexpired lease on a slot now' }),
      last_success: Type.Union([
        Type.Object({
          at: At,
          size_bytes: Type.Integer({ minimum: 0 }),
          location: Type.Union([Type.String(), Type.Null()]),
        }),
        Type.Null(),
      ]),
      last_failure: Type.Union([
        Type.Object({
          at: At,
          message: Type.String({
            description: 'The error, at most 500 characters, credentials in URLs masked',
          }),
        }),
        Type.Null(),
      ]),
      failures: Type.Integer({ minimum: 0, description: 'Failed scheduled backups, all nodes' }),
    }),
  }),
)
