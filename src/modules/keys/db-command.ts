import { SQLITE_CIPHER } from '../../store/sqlite-cipher.js'
import { fileKeyPath, readFileKeyFile } from '../../store/sqlite-file-key.js'
import type { PreparedSqliteFile } from './file-key.js'

/** `coffer db encrypt`: what the start-up step did to the file (file-key.ts). */
export function encryptReport(databaseFile: string, prepared: PreparedSqliteFile) {
  return {
    database: databaseFile,
    key_file: fileKeyPath(databaseFile),
    was: prepared.was,
    encrypted: true,
    ...(prepared.converted ? { converted: prepared.converted } : {}),
    ...(prepared.recovered.length > 0 ? { recovered: prepared.recovered } : {}),
    message:
      prepared.was === 'plaintext'
        ? 'the database was converted and the plaintext file erased'
        : prepared.was === 'missing'
          ? 'no database yet: it will be created encrypted'
          : 'the database was already encrypted',
  }
}

/**
 * `coffer db key`: the cipher settings a forensic tool needs (decisions.md 227), and with
 * `--print` the file key itself and the commands that open the file with it. The key goes to
 * stdout only, never to a log; it is the whole database's key, so the command is audited.
 */
export function keyReport(databaseFile: string, prepared: PreparedSqliteFile, print: boolean) {
  const wrapped = readFileKeyFile(databaseFile)
  const base = {
    database: databaseFile,
    key_file: fileKeyPath(databaseFile),
    master_key_fingerprint: wrapped?.master_key_fingerprint,
    cipher: SQLITE_CIPHER.cipher,
    legacy: SQLITE_CIPHER.legacy,
    page_size: SQLITE_CIPHER.pageSize,
    kdf: 'none: the key is raw (random, 256 bits)',
  }
  if (!print) {
    return {
      ...base,
      message:
        'run `coffer db key --print` to print the file key (a secret: keep it out of logs, tickets and shell history)',
    }
  }
  const literal = `x'${prepared.key.toString('hex')}'`
  return {
    ...base,
    key: literal,
    sqlcipher: [`PRAGMA key = "${literal}";`, 'SELECT count(*) FROM sqlite_schema;'],
    sqlite3mc: [
      `PRAGMA cipher = '${SQLITE_CIPHER.cipher}';`,
      `PRAGMA legacy = ${SQLITE_CIPHER.legacy};`,
      `PRAGMA key = "${literal}";`,
      'SELECT count(*) FROM sqlite_schema;',
    ],
    message:
      'copy the database and its -wal file together (server stopped, or from a backup); open the copy, never the live file',
  }
}
