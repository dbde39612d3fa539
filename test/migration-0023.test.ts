import { describePolicyGrantMigration } from './helpers/policy-grant-migration.js'

/** Migration 0023 (backup status, issue 22): bootstrap admin groups gain `Backups::`. */
describePolicyGrantMigration({
  migration: '0023',
  before: '0022_backup_schedule',
  grants: 'Backups::',
  withheld: ['Backups::'],
  idTag: '23',
})
