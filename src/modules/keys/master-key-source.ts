import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import type { Config } from '../../config.js'
import { MasterKey } from '../../crypto/master-key.js'
import { dataKeyStore } from '../../store/data-keys.repo.js'
import type { Store } from '../../store/db.js'

/**
 * Finds the master key: `COFFER_MASTER_KEY`, else the key file. A key file is generated (mode
 * 0600) only for a database that holds no data keys yet and only on the embedded SQLite default:
 * nodes sharing a PostgreSQL database must share one key, so there it must be configured.
 * A key that does not unlock the stored data keys stops the server: it never serves data it
 * cannot decrypt, and never starts a second key beside the first.
 */
export async function loadMasterKey(
  config: Config,
  store: Store,
): Promise<{ key: MasterKey; generated: boolean }> {
  const wrappedBy = await dataKeyStore(store.db).masterKeyIds()
  if (config.masterKey) return { key: MasterKey.fromBase64(config.masterKey), generated: false }
  if (existsSync(config.masterKeyFile)) {
    return {
      key: MasterKey.fromBase64(readFileSync(config.masterKeyFile, 'utf8')),
      generated: false,
    }
  }
  if (wrappedBy.length > 0) {
    throw new Error(
      `no master key: this database's data is encrypted under master key ${wrappedBy.join(', ')}; set COFFER_MASTER_KEY or COFFER_MASTER_KEY_FILE`,
    )
  }
  if (store.dialect !== 'sqlite') {
    throw new Error('COFFER_MASTER_KEY (or COFFER_MASTER_KEY_FILE) is required with PostgreSQL')
  }
  const key = MasterKey.generate()
  writeKeyFile(config.masterKeyFile, key)
  return { key, generated: true }
}

/** Writes a key file atomically (temp file, then rename), readable by this user only. */
export function writeKeyFile(path: string, key: MasterKey): void {
  const temp = `${path}.${process.pid}.tmp`
  writeFileSync(temp, `${key.toBase64()}\n`, { mode: 0o600, flag: 'wx' })
  renameSync(temp, path)
}
