import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance } from 'fastify'
import type { BackupScheduleConfig } from '../../config-backup.js'
import { USER_CREDENTIALS } from '../../http/access.js'
import type { Clock } from '../../lib/clock.js'
import { type Requirement, resource } from '../../policy/index.js'
import type { Executor } from '../../store/executor.js'
import { backupStatus } from './backup-status.js'
import { BackupStatusResponse } from './backup-status.schemas.js'

/**
 * The deployment's backups are read under a resource of their own, `Backups::` with R
 * (decisions 248): the bootstrap admin group has it (migration 0023 gives it to earlier admin
 * groups). API keys and access tokens only: a SAT is handed to narrow clients.
 */
const backups = (): Requirement => ({ activity: 'R', resource: resource('Backups', '') })

export async function backupStatusRoutes(
  app: FastifyInstance,
  db: Executor,
  clock: Clock,
  config: BackupScheduleConfig | undefined,
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  r.get(
    '/v1/backups/status',
    {
      schema: {
        tags: ['backups'],
        summary:
          "The deployment's scheduled backups: settings, next planned run, last success and failure",
        response: BackupStatusResponse,
      },
      config: {
        operation: 'backup_status.read',
        access: { policy: backups, credentials: USER_CREDENTIALS },
      },
    },
    async () => ({ backup: await backupStatus(db, config, clock.now()) }),
  )
}
