import type { Migration } from 'kysely'
import * as m0001 from './0001_init.js'
import * as m0002 from './0002_data_plane.js'
import * as m0003 from './0003_search.js'
import * as m0004 from './0004_scoped_access_tokens.js'
import * as m0005 from './0005_mfa.js'
import * as m0006 from './0006_password_reset_flows.js'
import * as m0007 from './0007_consent.js'
import * as m0008 from './0008_search_sort_index.js'
import * as m0009 from './0009_sat_session.js'
import * as m0010 from './0010_bootstrap.js'
import * as m0011 from './0011_login_in_flight.js'
import * as m0012 from './0012_shard_ready_keys.js'
import * as m0013 from './0013_account_settings.js'
import * as m0014 from './0014_audit_trail.js'
import * as m0015 from './0015_operations_metering.js'
import * as m0016 from './0016_search_covering_indexes.js'
import * as m0017 from './0017_policy_simulator.js'
import * as m0018 from './0018_schema_reindex.js'
import * as m0019 from './0019_master_key_fingerprint.js'
import * as m0022 from './0022_backup_schedule.js'
import * as m0023 from './0023_backup_status.js'

/** Every migration in order. Never edit one that has shipped: add the next file instead. */
export const migrations: Record<string, Migration> = {
  '0001_init': m0001,
  '0002_data_plane': m0002,
  '0003_search': m0003,
  '0004_scoped_access_tokens': m0004,
  '0005_mfa': m0005,
  '0006_password_reset_flows': m0006,
  '0007_consent': m0007,
  '0008_search_sort_index': m0008,
  '0009_sat_session': m0009,
  '0010_bootstrap': m0010,
  '0011_login_in_flight': m0011,
  '0012_shard_ready_keys': m0012,
  '0013_account_settings': m0013,
  '0014_audit_trail': m0014,
  '0015_operations_metering': m0015,
  '0016_search_covering_indexes': m0016,
  '0017_policy_simulator': m0017,
  '0018_schema_reindex': m0018,
  '0019_master_key_fingerprint': m0019,
  '0022_backup_schedule': m0022,
  '0023_backup_status': m0023,
}
