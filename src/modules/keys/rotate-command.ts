import { existsSync } from 'node:fs'
import { Keyring } from '../../crypto/keyring.js'
import { MasterKey } from '../../crypto/master-key.js'
import { MasterKeySet } from '../../crypto/master-key-set.js'
import { systemClock } from '../../lib/clock.js'
import { dataKeyStore } from '../../store/data-keys.repo.js'
import type { Store } from '../../store/db.js'
import { rewrapFileKey } from './file-key.js'
import {
  loadMasterKey,
  type MasterKeyConfig,
  removePreviousKeysFile,
  writeKeyFile,
  writePreviousKeysFile,
} from './master-key-source.js'
import { type RotationProgress, type RotationReport, rotateMasterKey } from './rotation.js'

export interface RotateCommandConfig extends MasterKeyConfig {
  newMasterKey: string | undefined
  /** The SQLite file whose key file is re-wrapped too (PostgreSQL: none). */
  databaseUrl: string
}

export interface RotateCommandResult extends RotationReport {
  master_key_id: string
  /** How the command found its keys (the runbooks in the README). */
  mode: 'environment' | 'new-master-key' | 'key-file' | 'key-file-resumed'
  key_file?: string
  /** Names of the previous-keys file while it is still needed. */
  previous_keys_file?: string
  /**
   * The SQLite file key (store/sqlite-file-key.ts): re-wrapped under the current key by this
   * run, already under it, or no key file (PostgreSQL, `:memory:`).
   */
  file_key: 'rewrapped' | 'current' | 'none'
  /** True when neither a data key nor the file key is wrapped by another key than the current. */
  previousMayBeRetired: boolean
  message: string
}

/**
 * `coffer keys rotate`, online. Three ways in:
 * - COFFER_MASTER_KEY (+ COFFER_MASTER_KEY_PREVIOUS): the nodes already run with the new key as
 *   current and the old as previous; every data key is re-wrapped under the current one.
 * - COFFER_NEW_MASTER_KEY (the pre-0019 flow, kept: same end state as before): the data keys move
 *   to that key; on the key file, the file is replaced by it as before.
 * - the embedded key file: a new key is generated; the old one goes to the previous-keys file
 *   first, then the new key file is written (each crash-safe), serving nodes pick both up by
 *   themselves (key-file-watcher.ts), the data keys are re-wrapped, and the previous-keys file is
 *   removed once none needs it. Run again after a kill, it resumes (no second new key).
 * `rewrap` runs the re-wrap (main.ts wraps it in the audit trail).
 */
export async function runKeyRotation(
  config: RotateCommandConfig,
  store: Store,
  rewrap: (fn: () => Promise<RotationReport>) => Promise<RotationReport>,
  options: { onProgress?: (progress: RotationProgress) => void; batchSize?: number } = {},
): Promise<RotateCommandResult> {
  const held = await loadMasterKey(config, store)
  let keys: MasterKeySet
  let mode: RotateCommandResult['mode']
  const onKeyFile = !config.masterKey
  let writeFiles = false
  if (config.newMasterKey) {
    mode = 'new-master-key'
    const next = MasterKey.fromBase64(config.newMasterKey)
    keys = new MasterKeySet(next, held.keys.all())
    writeFiles = onKeyFile
  } else if (!onKeyFile) {
    mode = 'environment'
    if (held.keys.previous.length === 0) {
      throw new Error(
        'the master key comes from COFFER_MASTER_KEY and no previous key is set: run every node with the new key in COFFER_MASTER_KEY and the old one in COFFER_MASTER_KEY_PREVIOUS, then rotate (README, key rotation runbook); or give the new key in COFFER_NEW_MASTER_KEY',
      )
    }
    keys = held.keys
  } else if (existsSync(config.masterKeyPreviousFile) && held.keys.previous.length > 0) {
    // An earlier run wrote the new key file and was stopped before it finished: finish it.
    mode = 'key-file-resumed'
    keys = held.keys
  } else {
    mode = 'key-file'
    keys = new MasterKeySet(MasterKey.generate(), held.keys.all())
    writeFiles = true
  }
  // Before any file is written: every data key must open with the keys in hand.
  await new Keyring(keys, dataKeyStore(store.db), systemClock).assertUnlocks()
  if (writeFiles) moveKeyFile(config, keys)
  // One small file, replaced crash-safely: the database itself is never rewritten. Before the
  // data keys, so a run that stops halfway has nothing left to do here when resumed.
  const fileKey = store.dialect === 'sqlite' ? rewrapFileKey(config.databaseUrl, keys) : 'none'
  const report = await rewrap(() => rotateMasterKey(store, keys, options))
  const retired = report.notUnderCurrent === 0
  if (onKeyFile && retired) removePreviousKeysFile(config.masterKeyPreviousFile)
  return {
    ...report,
    master_key_id: keys.current.id,
    mode,
    ...(onKeyFile ? { key_file: config.masterKeyFile } : {}),
    ...(onKeyFile && !retired ? { previous_keys_file: config.masterKeyPreviousFile } : {}),
    file_key: fileKey,
    previousMayBeRetired: retired,
    message: retired
      ? 'every data key is wrapped by the current master key: the previous key may be retired'
      : `${report.notUnderCurrent} data key(s) are still wrapped by another master key: keep the previous key and run \`coffer keys rotate\` again`,
  }
}

/**
 * The key-file switch, in the order that survives a kill at any point: the keys that still
 * unwrap (old current and previous) go to the previous-keys file first, then the new key file
 * replaces the old one. A kill between the two leaves the old key current (and also listed as
 * previous, which changes nothing); a new run starts over.
 */
function moveKeyFile(config: MasterKeyConfig, keys: MasterKeySet): void {
  writePreviousKeysFile(config.masterKeyPreviousFile, keys.previous)
  writeKeyFile(config.masterKeyFile, keys.current)
}
