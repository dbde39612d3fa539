import { readFileSync } from 'node:fs'
import { IntegrityError } from '../crypto/aead.js'
import type { MasterKey } from '../crypto/master-key.js'
import { createSecretFile, writeSecretFile } from '../lib/durable-file.js'
import { SQLITE_CIPHER } from './sqlite-cipher.js'

/**
 * The key file of an encrypted SQLite database: `<database>.filekey.json`, beside it (it cannot
 * live inside the file it opens). It holds the random file key wrapped by a master key
 * (AES-256-GCM, its own associated data: MasterKey.wrapFileKey) and that key's fingerprint, like
 * a data key's row; and, in plain words, the cipher settings a forensic tool needs. Rotating the
 * master key re-wraps this one value: the database itself is never rewritten.
 */
export interface SqliteFileKeyFile {
  format: typeof FORMAT
  cipher: typeof SQLITE_CIPHER.cipher
  legacy: typeof SQLITE_CIPHER.legacy
  page_size: typeof SQLITE_CIPHER.pageSize
  master_key_fingerprint: string
  wrapped_key: string
}

const FORMAT = 'coffer-sqlite-file-key/1'

/** Where the key file of a database file is. */
export function fileKeyPath(databaseFile: string): string {
  return `${databaseFile}.filekey.json`
}

function contents(wrappedBy: MasterKey, fileKey: Buffer): string {
  const file: SqliteFileKeyFile = {
    format: FORMAT,
    cipher: SQLITE_CIPHER.cipher,
    legacy: SQLITE_CIPHER.legacy,
    page_size: SQLITE_CIPHER.pageSize,
    master_key_fingerprint: wrappedBy.id,
    wrapped_key: wrappedBy.wrapFileKey(fileKey),
  }
  return `${JSON.stringify(file, null, 2)}\n`
}

/** The key file, or undefined when there is none; throws (naming the file) when it is damaged. */
export function readFileKeyFile(databaseFile: string): SqliteFileKeyFile | undefined {
  const path = fileKeyPath(databaseFile)
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  let parsed: Partial<SqliteFileKeyFile>
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new IntegrityError(`${path} is not a Coffer database key file (not JSON)`)
  }
  if (
    parsed.format !== FORMAT ||
    parsed.cipher !== SQLITE_CIPHER.cipher ||
    parsed.legacy !== SQLITE_CIPHER.legacy ||
    typeof parsed.master_key_fingerprint !== 'string' ||
    typeof parsed.wrapped_key !== 'string'
  ) {
    throw new IntegrityError(`${path} is not a Coffer database key file (format ${FORMAT})`)
  }
  return parsed as SqliteFileKeyFile
}

/**
 * Writes the key file of a new database unless one exists (two processes starting on a new file
 * at once agree on one key: the loser reads the winner's). Returns whether this call wrote it.
 */
export function createFileKeyFile(
  databaseFile: string,
  wrappedBy: MasterKey,
  key: Buffer,
): boolean {
  return createSecretFile(fileKeyPath(databaseFile), contents(wrappedBy, key))
}

/** Replaces the key file crash-safely (temp, fsync, rename, fsync of the folder). */
export function replaceFileKeyFile(databaseFile: string, wrappedBy: MasterKey, key: Buffer): void {
  writeSecretFile(fileKeyPath(databaseFile), contents(wrappedBy, key))
}
