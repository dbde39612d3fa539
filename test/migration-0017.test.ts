import { describePolicyGrantMigration } from './helpers/policy-grant-migration.js'

/** Migration 0017 (policy simulator, issue 15): bootstrap admin groups gain `PolicySimulator::`. */
describePolicyGrantMigration({
  migration: '0017',
  before: '0015_operations_metering',
  grants: 'PolicySimulator::',
  // Nor the backup status grant (0023), also run by migrateToLatest.
  withheld: ['PolicySimulator::', 'Backups::'],
  idTag: '17',
})
