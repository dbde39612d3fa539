import { existsSync, readFileSync, rmSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Config } from '../../config.js'
import { MasterKey } from '../../crypto/master-key.js'
import { MasterKeySet } from '../../crypto/master-key-set.js'
import { syncFolder, writeSecretFile } from '../../lib/durable-file.js'
import { dataKeyStore } from '../../store/data-keys.repo.js'
import type { Store } from '../../store/db.js'

/** The master-key settings this module reads. */
export type MasterKeyConfig = Pick<
  Config,
  'masterKey' | 'masterKeyFile' | 'masterKeyPrevious' | 'masterKeyPreviousFile'
>

/**
 * Finds the master keys: the current one from `COFFER_MASTER_KEY`, else the key file; previous
 * ones from `COFFER_MASTER_KEY_PREVIOUS` and the previous-keys file. A key file is generated
 * (mode 0600) only for a database that holds no data keys yet and only on the embedded SQLite
 * default: nodes sharing a PostgreSQL database must share one key, so there it must be
 * configured. Keys that do not unlock the stored data keys stop the server (Keyring.assertUnlocks):
 * it never serves data it cannot decrypt, and never starts a second key beside the first.
 */
export async function loadMasterKey(
  config: MasterKeyConfig,
  store: Store,
): Promise<{ key: MasterKey; keys: MasterKeySet; generated: boolean }> {
  const previous = readPreviousKeys(config)
  if (config.masterKey || existsSync(config.masterKeyFile)) {
    const keys = new MasterKeySet(readCurrentKey(config), previous)
    return { key: keys.current, keys, generated: false }
  }
  const wrappedBy = await dataKeyStore(store.db).wrappedBy()
  if (wrappedBy.length > 0) {
    const names = wrappedBy.map((r) => r.master_key_fingerprint ?? r.master_key_id)
    throw new Error(
      `no master key: this database's data is encrypted under master key ${[...new Set(names)].join(', ')}; set COFFER_MASTER_KEY or COFFER_MASTER_KEY_FILE`,
    )
  }
  if (store.dialect !== 'sqlite') {
    throw new Error('COFFER_MASTER_KEY (or COFFER_MASTER_KEY_FILE) is required with PostgreSQL')
  }
  const key = MasterKey.generate()
  writeKeyFile(config.masterKeyFile, key)
  return { key, keys: new MasterKeySet(key, previous), generated: true }
}

/** The current key: COFFER_MASTER_KEY, else the key file (which must exist). */
export function readCurrentKey(config: MasterKeyConfig): MasterKey {
  if (config.masterKey) return MasterKey.fromBase64(config.masterKey)
  return MasterKey.fromBase64(readFileSync(config.masterKeyFile, 'utf8'))
}

/**
 * Previous keys: COFFER_MASTER_KEY_PREVIOUS, then the previous-keys file (absent: none). The file
 * holds base64 keys separated by commas or newlines; `coffer keys rotate` writes it beside the
 * embedded key file and removes it once no data key needs those keys.
 */
export function readPreviousKeys(config: MasterKeyConfig): MasterKey[] {
  const keys = config.masterKeyPrevious ? MasterKeySet.parseList(config.masterKeyPrevious) : []
  if (existsSync(config.masterKeyPreviousFile)) {
    keys.push(...MasterKeySet.parseList(readFileSync(config.masterKeyPreviousFile, 'utf8')))
  }
  return keys
}

/** Writes a key file crash-safely: a temp file, fsync, rename, fsync of the folder; mode 0600. */
export function writeKeyFile(path: string, key: MasterKey): void {
  writeSecretFile(path, `${key.toBase64()}\n`)
}

/** Writes the previous-keys file (one base64 key a line), crash-safely like the key file. */
export function writePreviousKeysFile(path: string, keys: readonly MasterKey[]): void {
  writeSecretFile(path, keys.map((k) => `${k.toBase64()}\n`).join(''))
}

/** Removes the previous-keys file (the folder is synced so the removal survives a crash). */
export function removePreviousKeysFile(path: string): void {
  rmSync(path, { force: true })
  syncFolder(dirname(path))
}
