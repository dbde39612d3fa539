import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import type { Config } from '../../config.js'
import { IntegrityError } from '../../crypto/aead.js'
import { Keyring } from '../../crypto/keyring.js'
import { MasterKey } from '../../crypto/master-key.js'
import { MasterKeySet } from '../../crypto/master-key-set.js'
import { systemClock } from '../../lib/clock.js'
import { dataKeyStore } from '../../store/data-keys.repo.js'
import { openStore } from '../../store/db.js'
import { migrateToLatest } from '../../store/migrate.js'
import { SQLITE_FILE_KEY_BYTES, sqliteFileState } from '../../store/sqlite-cipher.js'
import {
  type EncryptReport,
  type EncryptStep,
  encryptSqliteFile,
  recoverSqliteConversion,
} from '../../store/sqlite-encrypt.js'
import {
  createFileKeyFile,
  fileKeyPath,
  readFileKeyFile,
  replaceFileKeyFile,
  type SqliteFileKeyFile,
} from '../../store/sqlite-file-key.js'
import {
  loadMasterKey,
  type MasterKeyConfig,
  readCurrentKey,
  readPreviousKeys,
  writeKeyFile,
} from './master-key-source.js'

/** Steps of the start-up preparation announced to `onStep` (tests kill the process at each). */
export type PrepareStep = 'key-file' | EncryptStep

/** The settings the embedded database's key needs. */
export type FileKeyConfig = MasterKeyConfig &
  Pick<Config, 'databaseUrl'> & { database: Pick<Config['database'], 'sqliteBusyTimeoutMs'> }

export interface PreparedSqliteFile {
  /** The file key: openStore's `sqliteKey`. */
  key: Buffer
  /** The master keys held (current and previous). */
  keys: MasterKeySet
  /** True when this call generated the master key (a new database without a key file). */
  generated: boolean
  /** What the file was before: `missing` (new), `plaintext` (converted now) or `encrypted`. */
  was: 'missing' | 'plaintext' | 'encrypted'
  /** The conversion of a plaintext file, when this call did one. */
  converted?: EncryptReport
  /** What was cleaned up after an interrupted conversion (for the log). */
  recovered: string[]
}

/**
 * Readies the embedded database file before it is opened (issue 22): finishes or undoes an
 * interrupted conversion, finds the master keys, unwraps the file key from the key file beside
 * the database (creating both for a new database), and converts a plaintext file from an
 * earlier release — after migrating it and checking that the master keys open every data key,
 * so a file key is never wrapped under a key that turns out to be the wrong one.
 */
export async function prepareSqliteFile(
  config: FileKeyConfig,
  options: { onStep?: (step: PrepareStep) => void } = {},
): Promise<PreparedSqliteFile> {
  const file = config.databaseUrl
  const recovered = recoverSqliteConversion(file)
  const was = sqliteFileState(file)
  const wrapped = readFileKeyFile(file)
  if (!wrapped && was === 'encrypted') {
    throw new Error(
      `${file} is encrypted but its key file ${fileKeyPath(file)} is missing: restore it from where the database came from (it belongs with the database in every copy of the data folder)`,
    )
  }
  let keys: MasterKeySet
  let generated = false
  if (was === 'plaintext') {
    ;({ keys, generated } = await plaintextKeys(config))
  } else if (config.masterKey || existsSync(config.masterKeyFile)) {
    keys = new MasterKeySet(readCurrentKey(config), readPreviousKeys(config))
  } else if (wrapped) {
    throw new Error(
      `no master key: the key of ${file} (in ${fileKeyPath(file)}) is wrapped by master key ${wrapped.master_key_fingerprint}; set COFFER_MASTER_KEY or COFFER_MASTER_KEY_FILE`,
    )
  } else {
    // A new database: nothing is encrypted under any key yet, so a new key is safe.
    const key = MasterKey.generate()
    writeKeyFile(config.masterKeyFile, key)
    keys = new MasterKeySet(key, readPreviousKeys(config))
    generated = true
  }
  const key = wrapped ? unwrap(file, keys, wrapped) : fileKeyFor(file, keys)
  options.onStep?.('key-file')
  const converted =
    was === 'plaintext'
      ? encryptSqliteFile(file, key, {
          busyTimeoutMs: config.database.sqliteBusyTimeoutMs,
          ...(options.onStep ? { onStep: options.onStep } : {}),
        })
      : undefined
  return { key, keys, generated, was, recovered, ...(converted ? { converted } : {}) }
}

/**
 * The file key of a SQLite file, from its key file; a new key file (random key wrapped by the
 * current master key) when there is none yet. Two processes creating it at once agree on one.
 */
export function fileKeyFor(databaseFile: string, keys: MasterKeySet): Buffer {
  const wrapped = readFileKeyFile(databaseFile)
  if (wrapped) return unwrap(databaseFile, keys, wrapped)
  const key = randomBytes(SQLITE_FILE_KEY_BYTES)
  if (createFileKeyFile(databaseFile, keys.current, key)) return key
  // Another process created it first: its key is the one.
  return unwrap(databaseFile, keys, readFileKeyFile(databaseFile) as SqliteFileKeyFile)
}

/**
 * The master keys of a plaintext database, found as before this release: migrated first (the
 * fingerprint column), a key generated only when it holds no data keys, and checked to open
 * every data key it holds.
 */
async function plaintextKeys(
  config: FileKeyConfig,
): Promise<{ keys: MasterKeySet; generated: boolean }> {
  const plain = openStore({
    url: config.databaseUrl,
    sqliteBusyTimeoutMs: config.database.sqliteBusyTimeoutMs,
    sqliteReadWorkers: 0,
  })
  try {
    await migrateToLatest(plain.db)
    const { keys, generated } = await loadMasterKey(config, plain)
    await new Keyring(keys, dataKeyStore(plain.db), systemClock).assertUnlocks()
    return { keys, generated }
  } finally {
    await plain.close()
  }
}

function unwrap(file: string, keys: MasterKeySet, wrapped: SqliteFileKeyFile): Buffer {
  if (!keys.holdsFingerprint(wrapped.master_key_fingerprint)) {
    // Worded as Keyring.assertUnlocks words it for data keys: the same mistake, the same answer.
    const previous = keys.previous.map((k) => k.id)
    throw new Error(
      `the configured master key (id ${keys.current.id}${previous.length > 0 ? `, previous ${previous.join(', ')}` : ''}) does not unlock this database: its file key (${fileKeyPath(file)}) is wrapped by master key ${wrapped.master_key_fingerprint}`,
    )
  }
  try {
    return keys.unwrapFileKey(wrapped).key
  } catch (error) {
    if (error instanceof IntegrityError) {
      throw new IntegrityError(
        `${fileKeyPath(file)} failed its integrity check: it was changed or damaged (restore it from a copy of the data folder)`,
      )
    }
    throw error
  }
}

/**
 * `coffer keys rotate`: the file key wrapped under the current master key (crash-safe replace
 * of the key file). The database itself is not touched. `none`: no key file (PostgreSQL, or
 * `:memory:`).
 */
export function rewrapFileKey(
  databaseFile: string,
  keys: MasterKeySet,
): 'rewrapped' | 'current' | 'none' {
  const wrapped = readFileKeyFile(databaseFile)
  if (!wrapped) return 'none'
  if (wrapped.master_key_fingerprint === keys.current.id) return 'current'
  replaceFileKeyFile(databaseFile, keys.current, unwrap(databaseFile, keys, wrapped))
  return 'rewrapped'
}
