import { existsSync } from 'node:fs'
import { MasterKeySet } from '../../crypto/master-key-set.js'
import {
  type MasterKeyConfig,
  readCurrentKey,
  readPreviousKeys,
} from '../keys/master-key-source.js'

/**
 * The master keys this node holds (current and previous), read without a database: verify and
 * restore need them before any database is opened, and never generate one.
 */
export function heldMasterKeys(config: MasterKeyConfig): MasterKeySet {
  if (!config.masterKey && !existsSync(config.masterKeyFile)) {
    throw new Error(
      `no master key: set COFFER_MASTER_KEY, or put the key file at ${config.masterKeyFile} (COFFER_MASTER_KEY_FILE)`,
    )
  }
  return new MasterKeySet(readCurrentKey(config), readPreviousKeys(config))
}
