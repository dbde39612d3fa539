import { existsSync, linkSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import SQLite from 'better-sqlite3-multiple-ciphers'
import { eraseFile, syncFile, syncFolder } from '../lib/durable-file.js'
import { applySqliteKey, sqliteFileState } from './sqlite-cipher.js'

/**
 * The one-time conversion of a plaintext SQLite database into an encrypted one (issue 22), built
 * so that a kill at any moment leaves either the old file or the new one whole at the database's
 * name, and the plaintext is erased only once the new file is verified:
 *
 * 1. `<db>.encrypting` is created with the file key; the plaintext file is attached to it and
 *    locked exclusively (its WAL checkpointed first: the switch to rollback mode fails while any
 *    other connection has it open, so a serving node is never converted under its feet).
 * 2. Schema and rows are copied (rowids kept), then indexes and triggers; the copy is checked
 *    (`integrity_check`, every table's row count against the original, the key opens it on a
 *    fresh connection) and flushed.
 * 3. The plaintext file gets a second name, `<db>.plaintext` (a hard link), then the new file is
 *    renamed over `<db>` (atomic), then the plaintext is overwritten with zeros and unlinked.
 *
 * Leftovers of a kill are dealt with at the next start (recoverSqliteConversion): the temp file
 * is removed, a second name of the live file is merely unlinked, and the old plaintext, once the
 * encrypted file has replaced it, is erased.
 */

/** Steps announced to `onStep` (tests kill the process at each). */
export const ENCRYPT_STEPS = [
  'locked',
  'tables-created',
  'copied',
  'verified',
  'linked',
  'renamed',
  'erased',
] as const
export type EncryptStep = (typeof ENCRYPT_STEPS)[number]

export interface EncryptOptions {
  busyTimeoutMs: number
  /** Called after each step (tests: a kill there must leave a usable database). */
  onStep?: (step: EncryptStep) => void
}

export interface EncryptReport {
  tables: number
  rows: number
  /** Bytes of the encrypted file. */
  bytes: number
}

/** Another process has the plaintext database open: it cannot be converted now. */
export class SqliteInUseError extends Error {
  constructor(file: string) {
    super(
      `${file} is open in another process: stop every server and command using it, then start again (or run \`coffer db encrypt\`)`,
    )
    this.name = 'SqliteInUseError'
  }
}

/** The encrypted copy being built. */
export const encryptingPath = (file: string) => `${file}.encrypting`
/** The plaintext file's second name, from just before the switch until it is erased. */
export const plaintextPath = (file: string) => `${file}.plaintext`
/** The plaintext WAL's second name, so its bytes can be erased after SQLite unlinks it. */
const plaintextWalPath = (file: string) => `${file}-wal.plaintext`

function sameFile(a: string, b: string): boolean {
  try {
    const sa = statSync(a)
    const sb = statSync(b)
    return sa.ino === sb.ino && sa.dev === sb.dev
  } catch {
    return false
  }
}

function removeTemp(file: string): void {
  const temp = encryptingPath(file)
  for (const path of [temp, `${temp}-journal`, `${temp}-wal`, `${temp}-shm`])
    rmSync(path, { force: true })
}

/**
 * A second name made by the conversion: only unlinked while it still names the live file (a
 * kill before the switch), else erased (its bytes are the replaced plaintext).
 */
function dropSecondName(secondName: string, live: string): 'none' | 'unlinked' | 'erased' {
  if (!existsSync(secondName)) return 'none'
  if (sameFile(secondName, live)) {
    rmSync(secondName, { force: true })
    syncFolder(dirname(secondName))
    return 'unlinked'
  }
  eraseFile(secondName)
  return 'erased'
}

/**
 * Finishes or undoes what a killed conversion left, before the database is opened. Returns what
 * it did, for the log. Refuses (throws) when the plaintext copy is all there is: the database
 * itself is missing, or a plaintext file stands beside a plaintext database.
 */
export function recoverSqliteConversion(file: string): string[] {
  const done: string[] = []
  if (existsSync(encryptingPath(file))) {
    removeTemp(file)
    done.push(`removed ${encryptingPath(file)}, the copy of an interrupted conversion`)
  }
  const wal = dropSecondName(plaintextWalPath(file), `${file}-wal`)
  if (wal !== 'none') done.push(`${wal} ${plaintextWalPath(file)}`)
  const second = plaintextPath(file)
  if (existsSync(second)) {
    if (sameFile(second, file)) {
      dropSecondName(second, file)
      done.push(`unlinked ${second} (the conversion stopped before the switch)`)
    } else if (sqliteFileState(file) === 'encrypted') {
      eraseFile(second)
      done.push(`erased ${second}, the plaintext an interrupted conversion had replaced`)
    } else {
      throw new Error(
        `${second} is in the way: the plaintext copy of an earlier conversion, and ${file} is ${sqliteFileState(file) === 'missing' ? 'missing' : 'not encrypted'}; move one of them away`,
      )
    }
  }
  return done
}

interface SchemaRow {
  type: string
  name: string
  tbl_name: string
  sql: string | null
}

/**
 * Converts the plaintext database at `file` in place (see above). `key`: the file key, whose
 * key file must already be written (a kill after the switch must leave a database that opens).
 */
export function encryptSqliteFile(
  file: string,
  key: Buffer,
  options: EncryptOptions,
): EncryptReport {
  const step = options.onStep ?? (() => {})
  removeTemp(file)
  const temp = encryptingPath(file)
  const before = statSync(file)
  const db = new SQLite(temp)
  let closed = false
  const close = () => {
    if (!closed) db.close()
    closed = true
  }
  try {
    db.pragma(`busy_timeout = ${options.busyTimeoutMs}`)
    applySqliteKey(db, key, temp)
    // A temp file: a kill leaves it to be removed, so no journal; flushed once, at the end.
    db.pragma('journal_mode = OFF')
    db.pragma('synchronous = OFF')
    db.pragma('temp_store = MEMORY')
    db.pragma('foreign_keys = OFF')
    db.prepare(`attach database ? as plain key ''`).run(file)
    lockPlaintext(db, file)
    const now = statSync(file)
    if (now.ino !== before.ino || now.dev !== before.dev) {
      throw new Error(`${file} was replaced while the conversion waited for it; start again`)
    }
    // The shared-memory index of a WAL nobody uses any more: the new file must not inherit it.
    rmSync(`${file}-shm`, { force: true })
    if (existsSync(`${file}-wal`)) throw new SqliteInUseError(file)
    step('locked')

    const report = copyDatabase(db, step)
    verifyCopy(db, temp, key, report.tables)
    syncFile(temp)
    step('verified')

    linkSync(file, plaintextPath(file))
    syncFolder(dirname(file))
    step('linked')
    renameSync(temp, file)
    syncFolder(dirname(file))
    step('renamed')
    close()
    eraseFile(plaintextPath(file))
    dropSecondName(plaintextWalPath(file), `${file}-wal`)
    step('erased')
    return { ...report, bytes: statSync(file).size }
  } catch (error) {
    close()
    // Before the switch the temp file is garbage; after it, it no longer exists.
    if (existsSync(temp) && !sameFile(temp, file)) removeTemp(file)
    if (existsSync(plaintextPath(file)) && sameFile(plaintextPath(file), file))
      rmSync(plaintextPath(file), { force: true })
    throw error
  }
}

/**
 * Takes the plaintext file for this connection alone: out of WAL mode (SQLite checkpoints it and
 * refuses while another connection has it open), then an exclusive lock kept until close.
 * The WAL's bytes get a second name first, so they can be erased once SQLite has unlinked it.
 */
function lockPlaintext(db: SQLite.Database, file: string): void {
  db.pragma('plain.locking_mode = EXCLUSIVE')
  const mode = db.pragma('plain.journal_mode', { simple: true })
  const walLink = plaintextWalPath(file)
  const linked = mode === 'wal' && existsSync(`${file}-wal`)
  if (linked) linkSync(`${file}-wal`, walLink)
  let switched: unknown
  try {
    switched = db.pragma('plain.journal_mode = DELETE', { simple: true })
    db.exec('begin exclusive')
    db.exec('commit')
  } catch (error) {
    if (linked) rmSync(walLink, { force: true })
    if (String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY'))
      throw new SqliteInUseError(file)
    throw error
  }
  if (switched !== 'delete') {
    if (linked) rmSync(walLink, { force: true })
    throw new SqliteInUseError(file)
  }
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`

/**
 * Copies the attached `plain` into `main`: settings that must precede the first table, tables,
 * their rows (rowids kept: nothing may renumber), SQLite's own sequence and statistics, then
 * indexes, triggers and views (triggers after the rows, so copying fires none).
 */
function copyDatabase(
  db: SQLite.Database,
  step: (s: EncryptStep) => void,
): { tables: number; rows: number } {
  const objects = db
    .prepare(`select type, name, tbl_name, sql from plain.sqlite_schema order by rowid`)
    .all() as SchemaRow[]
  db.pragma(`main.auto_vacuum = ${Number(db.pragma('plain.auto_vacuum', { simple: true }))}`)
  const tables = objects.filter((o) => o.type === 'table' && !o.name.startsWith('sqlite_'))
  let rows = 0
  db.exec('begin')
  try {
    for (const t of tables) db.exec(t.sql as string)
    step('tables-created')
    for (const t of tables) rows += copyRows(db, t.name)
    const internal = new Set(objects.filter((o) => o.type === 'table').map((o) => o.name))
    if (internal.has('sqlite_sequence')) {
      db.exec('delete from main.sqlite_sequence')
      db.exec('insert into main.sqlite_sequence select * from plain.sqlite_sequence')
    }
    if (internal.has('sqlite_stat1')) {
      // Creates an empty sqlite_stat1 without analysing anything; the statistics are copied.
      db.exec('analyze main.sqlite_schema')
      db.exec('delete from main.sqlite_stat1')
      db.exec('insert into main.sqlite_stat1 select * from plain.sqlite_stat1')
    }
    for (const o of objects) {
      if (o.type !== 'table' && o.sql !== null && !o.name.startsWith('sqlite_')) db.exec(o.sql)
    }
    for (const pragma of ['user_version', 'application_id']) {
      db.pragma(`main.${pragma} = ${Number(db.pragma(`plain.${pragma}`, { simple: true }))}`)
    }
    db.exec('commit')
  } catch (error) {
    if (db.inTransaction) db.exec('rollback')
    throw error
  }
  step('copied')
  return { tables: tables.length, rows }
}

function copyRows(db: SQLite.Database, table: string): number {
  const columns = (
    db.prepare(`select name, hidden from pragma_table_xinfo(?, 'plain')`).all(table) as {
      name: string
      hidden: number
    }[]
  )
    // Generated columns (hidden 2 and 3) are computed, never inserted.
    .filter((c) => c.hidden < 2)
    .map((c) => c.name)
  const names = columns.map(quote)
  let hasRowid = !columns.some((c) => ['rowid', 'oid', '_rowid_'].includes(c.toLowerCase()))
  if (hasRowid) {
    try {
      db.prepare(`select rowid from plain.${quote(table)} limit 0`)
    } catch {
      hasRowid = false // WITHOUT ROWID
    }
  }
  const list = (hasRowid ? ['rowid', ...names] : names).join(', ')
  return db
    .prepare(`insert into main.${quote(table)} (${list}) select ${list} from plain.${quote(table)}`)
    .run().changes
}

/**
 * The copy is whole: SQLite's own integrity check of it, the same row count in every table as
 * the original, and its key opens it on a fresh connection (as the server will).
 */
function verifyCopy(db: SQLite.Database, temp: string, key: Buffer, tables: number): void {
  const check = db.pragma('main.integrity_check', { simple: true })
  if (check !== 'ok') throw new Error(`the encrypted copy failed its integrity check: ${check}`)
  const names = (
    db
      .prepare(
        `select name from plain.sqlite_schema where type = 'table' and name not like 'sqlite\\_%' escape '\\'`,
      )
      .all() as { name: string }[]
  ).map((r) => r.name)
  if (names.length !== tables) throw new Error('the plaintext database changed during the copy')
  for (const name of names) {
    const count = (schema: string) =>
      (db.prepare(`select count(*) as n from ${schema}.${quote(name)}`).get() as { n: number }).n
    const [was, now] = [count('plain'), count('main')]
    if (was !== now)
      throw new Error(`the encrypted copy of table ${name} has ${now} rows, the original ${was}`)
  }
  const fresh = new SQLite(temp, { readonly: true, fileMustExist: true })
  try {
    applySqliteKey(fresh, key, temp)
    const objects = (n: SQLite.Database, schema: string) =>
      (n.prepare(`select count(*) as n from ${schema}.sqlite_schema`).get() as { n: number }).n
    if (objects(fresh, 'main') !== objects(db, 'plain'))
      throw new Error('the encrypted copy does not hold every table, index and trigger')
  } finally {
    fresh.close()
  }
}
