import { closeSync, openSync, readSync, statSync } from 'node:fs'
import type SQLite from 'better-sqlite3-multiple-ciphers'

/**
 * The page cipher of the embedded database (issue 22, decisions 225–232): SQLite3MultipleCiphers'
 * `sqlcipher` scheme in its SQLCipher 4 form (`legacy=4`): AES-256-CBC per page with a random IV,
 * HMAC-SHA512 over each page, 4096-byte pages, the first 16 bytes of the file its salt — the
 * format of the SQLCipher 4 defaults, so `sqlcipher` and every SQLite3MultipleCiphers build open
 * it. The key is given raw (`x'<64 hex>'`): it is random, so no passphrase KDF runs on open.
 * The WAL and any rollback journal are encrypted with the same key.
 */
export const SQLITE_CIPHER = Object.freeze({ cipher: 'sqlcipher', legacy: 4, pageSize: 4096 })

/**
 * Page cache of each connection to an encrypted file, in KiB (SQLite's default here: 16 000).
 * A page read from the file is decrypted (AES-256-CBC in software: the package is built without
 * AES-NI) and its HMAC checked, about six times the cost of a plaintext page read from the OS
 * cache; a page in SQLite's cache is already decrypted. 64 MiB per connection keeps the working
 * set of most vaults decrypted (the main connection and each search worker have their own), so
 * reads keep their speed (decisions.md 228). It is an upper bound: memory is taken as pages are
 * read.
 */
export const SQLITE_ENCRYPTED_CACHE_KIB = 64 * 1024

/** Bytes of a file key (AES-256). */
export const SQLITE_FILE_KEY_BYTES = 32

/** The key as SQLCipher's raw-key literal: `x'…'` of 64 hex digits. */
export function rawKeyLiteral(key: Buffer): string {
  if (key.length !== SQLITE_FILE_KEY_BYTES) throw new Error('a SQLite file key is 32 bytes')
  return `x'${key.toString('hex')}'`
}

/** The database cannot be read with the key given (or without one, when it is encrypted). */
export class SqliteKeyError extends Error {
  constructor(file: string, keyed: boolean) {
    super(
      keyed
        ? `the database file key does not open ${file} (another key, or not an encrypted Coffer database)`
        : `${file} is encrypted: it opens only with its file key`,
    )
    this.name = 'SqliteKeyError'
  }
}

/**
 * Sets the cipher and the key on a connection just opened (before anything reads the file),
 * then reads the schema once: a wrong key fails here, with the file named, not at some later
 * query. `key` undefined: the file is plain (`:memory:`, a plaintext file being converted).
 */
export function applySqliteKey(
  database: SQLite.Database,
  key: Buffer | undefined,
  file: string,
): void {
  if (key) {
    database.pragma(`cipher = '${SQLITE_CIPHER.cipher}'`)
    database.pragma(`legacy = ${SQLITE_CIPHER.legacy}`)
    database.pragma(`key = "${rawKeyLiteral(key)}"`)
  }
  try {
    database.prepare('select count(*) from sqlite_schema').get()
  } catch (error) {
    if ((error as { code?: unknown }).code === 'SQLITE_NOTADB')
      throw new SqliteKeyError(file, key !== undefined)
    throw error
  }
  // After the check: setting the cache reads the schema, which a wrong key cannot.
  if (key) database.pragma(`cache_size = -${SQLITE_ENCRYPTED_CACHE_KIB}`)
}

/** Every SQLite file starts so; an encrypted one starts with its random salt instead. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1')

/**
 * What is at a SQLite path, judged by its first 16 bytes: nothing (`missing`, also an empty
 * file: SQLite writes nothing until the first page), a plaintext database, or something else
 * (`encrypted`: the salt of an encrypted one — or a file that is no database at all, which the
 * key then fails to open).
 */
export function sqliteFileState(file: string): 'missing' | 'plaintext' | 'encrypted' {
  let size: number
  try {
    size = statSync(file).size
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing'
    throw error
  }
  if (size === 0) return 'missing'
  const head = Buffer.alloc(SQLITE_HEADER.length)
  const fd = openSync(file, 'r')
  try {
    readSync(fd, head, 0, head.length, 0)
  } finally {
    closeSync(fd)
  }
  return head.equals(SQLITE_HEADER) ? 'plaintext' : 'encrypted'
}
