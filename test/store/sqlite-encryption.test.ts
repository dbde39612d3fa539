import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  existsSync,
  linkSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Plain from 'better-sqlite3'
import SQLite from 'better-sqlite3-multiple-ciphers'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { openStore } from '../../src/store/db.js'
import { applySqliteKey, SqliteKeyError, sqliteFileState } from '../../src/store/sqlite-cipher.js'
import {
  ENCRYPT_STEPS,
  encryptingPath,
  encryptSqliteFile,
  plaintextPath,
  recoverSqliteConversion,
  SqliteInUseError,
} from '../../src/store/sqlite-encrypt.js'
import { decryptSqlcipherFile } from '../helpers/sqlcipher.js'
import { testDialect } from '../helpers/store.js'

/**
 * The encrypted embedded database (issue 22, part 1) at the level of the file: the cipher is
 * SQLCipher 4's (an independent decryptor reads it and stock SQLite opens the result), a wrong or
 * missing key fails with the file named, and the one-time conversion of a plaintext file keeps
 * every row (rowids too), leaves no plaintext behind, refuses a file another process has open,
 * and cleans up after a kill.
 */
const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-sqlcrypt-'))
  dirs.push(dir)
  return dir
}

function keyed(file: string, key: Buffer, options: SQLite.Options = {}): SQLite.Database {
  const db = new SQLite(file, options)
  applySqliteKey(db, key, file)
  return db
}

/** Every file under a folder, its bytes. */
function folderBytes(dir: string): Map<string, Buffer> {
  return new Map(
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => [join(e.parentPath, e.name), readFileSync(join(e.parentPath, e.name))]),
  )
}

const SECRET = () => `plain-${randomBytes(8).toString('hex')}`

/**
 * A plaintext database as an earlier release leaves it: WAL mode, a rowid table with gaps,
 * WITHOUT ROWID, AUTOINCREMENT, an index, a trigger, a generated column, user_version, and
 * rows still in the WAL (not checkpointed: the writer is "killed" by leaving it open elsewhere
 * is not possible in-process, so the WAL is kept by a disabled autocheckpoint and no close).
 */
function plaintextDatabase(file: string, secret: string): void {
  const db = new Plain(file)
  db.pragma('journal_mode = WAL')
  db.exec(`
    create table people (name text not null, age integer, doubled integer generated always as (age * 2) virtual);
    create index people_name on people (name);
    create table kv (k text primary key, v text) without rowid;
    create table seq (id integer primary key autoincrement, note text);
    create table log (what text);
    create trigger people_log after insert on people begin insert into log values ('inserted ' || new.name); end;
    pragma user_version = 19;
  `)
  const add = db.prepare('insert into people (rowid, name, age) values (?, ?, ?)')
  for (let i = 1; i <= 500; i++) add.run(i * 3, `${secret}-${i}`, i % 90)
  db.exec(`delete from people where rowid = 30`)
  db.prepare('insert into kv values (?, ?)').run('k', secret)
  for (let i = 0; i < 5; i++) db.prepare('insert into seq (note) values (?)').run(`n${i}`)
  db.exec('delete from seq where id = 5')
  db.pragma('wal_checkpoint(TRUNCATE)')
  db.pragma('wal_autocheckpoint = 0')
  db.prepare('insert into kv values (?, ?)').run('in-wal', `${secret}-wal`)
  // Closing checkpoints: a copy of the WAL written now stands for one a killed writer left.
  const wal = readFileSync(`${file}-wal`)
  const main = readFileSync(file)
  db.close()
  writeFileSync(file, main)
  writeFileSync(`${file}-wal`, wal)
}

describe.skipIf(testDialect !== 'sqlite')('the encrypted SQLite file', () => {
  it('is SQLCipher 4: an independent decryptor reads it and stock SQLite opens the result', async () => {
    const dir = tempDir()
    const file = join(dir, 'coffer.db')
    const key = randomBytes(32)
    const secret = SECRET()
    const store = openStore({ url: file, sqliteKey: key, sqliteReadWorkers: 0 })
    await sql`create table t (x text)`.execute(store.db)
    for (let i = 0; i < 300; i++)
      await sql`insert into t values (${`${secret}-${i}`})`.execute(store.db)
    // the WAL holds the newest pages, encrypted too
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(0)
    for (const [name, bytes] of folderBytes(dir))
      expect(bytes.includes(secret), `${secret} in ${name}`).toBe(false)
    await store.close()
    expect(sqliteFileState(file)).toBe('encrypted')
    const image = decryptSqlcipherFile(file, key)
    writeFileSync(join(dir, 'decrypted.db'), image)
    const plain = new Plain(join(dir, 'decrypted.db'))
    try {
      expect(plain.prepare('select count(*) as n from t').get()).toEqual({ n: 300 })
      expect(plain.pragma('integrity_check', { simple: true })).toBe('ok')
    } finally {
      plain.close()
    }
    // and a flipped byte anywhere in a page fails its HMAC
    const bytes = readFileSync(file)
    bytes[4096 + 100] = (bytes[4096 + 100] as number) ^ 1
    writeFileSync(join(dir, 'flipped.db'), bytes)
    expect(() => decryptSqlcipherFile(join(dir, 'flipped.db'), key)).toThrow(/page 2: HMAC/)
  })

  it('opens only with its key: another key or none fails at open, naming the file', async () => {
    const dir = tempDir()
    const file = join(dir, 'coffer.db')
    const key = randomBytes(32)
    const store = openStore({ url: file, sqliteKey: key, sqliteReadWorkers: 0 })
    await sql`create table t (x text)`.execute(store.db)
    await store.close()
    expect(() => openStore({ url: file, sqliteKey: randomBytes(32) })).toThrow(SqliteKeyError)
    expect(() => openStore({ url: file, sqliteKey: randomBytes(32) })).toThrow(file)
    expect(() => openStore({ url: file })).toThrow(/is encrypted: it opens only with its file key/)
    // a plaintext file does not open with a key either (nothing is read as garbage)
    const plainFile = join(dir, 'plain.db')
    new Plain(plainFile).exec('create table t (x)')
    expect(() => openStore({ url: plainFile, sqliteKey: key })).toThrow(SqliteKeyError)
  })

  it('runs its read workers on the key: a search thread reads the encrypted file', async () => {
    const dir = tempDir()
    const key = randomBytes(32)
    const store = openStore({ url: join(dir, 'coffer.db'), sqliteKey: key, sqliteReadWorkers: 1 })
    try {
      await sql`create table t (x integer)`.execute(store.db)
      await sql`insert into t values (41), (1)`.execute(store.db)
      const pool = store.readPool
      if (!pool) throw new Error('no read pool')
      const [rows] = await pool.run([{ sql: 'select sum(x) as n from t', parameters: [] }])
      expect(rows).toEqual([{ n: 42 }])
    } finally {
      await store.close()
    }
  })
})

describe.skipIf(testDialect !== 'sqlite')('converting a plaintext database', () => {
  it('keeps every row, rowid, index, trigger and setting, fires no trigger, erases the plaintext', () => {
    const dir = tempDir()
    const file = join(dir, 'coffer.db')
    const secret = SECRET()
    plaintextDatabase(file, secret)
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(0)
    const before = new Plain(file, { readonly: true })
    const expected = {
      people: before.prepare('select rowid, * from people order by rowid').all(),
      kv: before.prepare('select * from kv order by k').all(),
      seq: before.prepare('select * from seq order by id').all(),
      sequence: before.prepare('select * from sqlite_sequence').all(),
      log: before.prepare('select count(*) as n from log').get(),
      schema: before.prepare('select type, name, sql from sqlite_schema order by name').all(),
    }
    before.close()
    expect(expected.kv).toContainEqual({ k: 'in-wal', v: `${secret}-wal` })
    const key = randomBytes(32)
    const steps: string[] = []
    const report = encryptSqliteFile(file, key, {
      busyTimeoutMs: 1000,
      onStep: (s) => steps.push(s),
    })
    expect(steps).toEqual([...ENCRYPT_STEPS])
    expect(report).toMatchObject({ tables: 4, rows: 499 + 2 + 4 + 500 })
    expect(sqliteFileState(file)).toBe('encrypted')
    for (const leftover of [encryptingPath(file), plaintextPath(file), `${file}-wal.plaintext`])
      expect(existsSync(leftover), leftover).toBe(false)
    for (const [name, bytes] of folderBytes(dir))
      expect(bytes.includes(secret), `${secret} in ${name}`).toBe(false)

    const db = keyed(file, key)
    try {
      expect(db.prepare('select rowid, * from people order by rowid').all()).toEqual(
        expected.people,
      )
      expect(db.prepare('select * from kv order by k').all()).toEqual(expected.kv)
      expect(db.prepare('select * from seq order by id').all()).toEqual(expected.seq)
      expect(db.prepare('select * from sqlite_sequence').all()).toEqual(expected.sequence)
      expect(db.prepare('select count(*) as n from log').get()).toEqual(expected.log)
      expect(db.prepare('select type, name, sql from sqlite_schema order by name').all()).toEqual(
        expected.schema,
      )
      expect(db.pragma('user_version', { simple: true })).toBe(19)
      // the trigger came along and works; autoincrement goes on past the deleted id
      db.prepare('insert into people (name, age) values (?, ?)').run('new', 1)
      expect(db.prepare('select count(*) as n from log').get()).toEqual({
        n: (expected.log as { n: number }).n + 1,
      })
      expect(db.prepare('insert into seq (note) values (?)').run('x').lastInsertRowid).toBe(6)
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
    } finally {
      db.close()
    }
  })

  it('refuses a file another process has open, and leaves it as it was', async () => {
    const dir = tempDir()
    const file = join(dir, 'coffer.db')
    const secret = SECRET()
    const db = new Plain(file)
    db.pragma('journal_mode = WAL')
    db.exec(`create table t (x text); insert into t values ('${secret}')`)
    db.close()
    // another process holds it open, as a server of the earlier release would
    const holder = spawn(
      process.execPath,
      [
        '-e',
        `const D = require('better-sqlite3'); const d = new D(${JSON.stringify(file)}); d.prepare('select * from t').all(); process.stdout.write('open'); setInterval(() => {}, 1000)`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    try {
      await new Promise((resolve) => holder.stdout?.once('data', resolve))
      expect(() => encryptSqliteFile(file, randomBytes(32), { busyTimeoutMs: 200 })).toThrow(
        SqliteInUseError,
      )
      expect(sqliteFileState(file)).toBe('plaintext')
      for (const leftover of [encryptingPath(file), plaintextPath(file), `${file}-wal.plaintext`])
        expect(existsSync(leftover), leftover).toBe(false)
    } finally {
      holder.kill('SIGKILL')
      await new Promise((resolve) => holder.once('exit', resolve))
    }
    const after = new Plain(file, { readonly: true })
    expect(after.prepare('select x from t').all()).toEqual([{ x: secret }])
    after.close()
  })
})

describe.skipIf(testDialect !== 'sqlite')('after a killed conversion', () => {
  function converted(): { dir: string; file: string; key: Buffer; secret: string } {
    const dir = tempDir()
    const file = join(dir, 'coffer.db')
    const secret = SECRET()
    plaintextDatabase(file, secret)
    return { dir, file, key: randomBytes(32), secret }
  }

  it('removes the half-built copy and leaves the plaintext database as it was', () => {
    const { file, secret } = converted()
    writeFileSync(encryptingPath(file), randomBytes(8192))
    writeFileSync(`${encryptingPath(file)}-journal`, randomBytes(100))
    expect(recoverSqliteConversion(file)).toHaveLength(1)
    expect(existsSync(encryptingPath(file))).toBe(false)
    expect(existsSync(`${encryptingPath(file)}-journal`)).toBe(false)
    const db = new Plain(file, { readonly: true })
    expect(db.prepare('select v from kv where k = ?').get('k')).toEqual({ v: secret })
    db.close()
  })

  it('only unlinks a second name of the live plaintext file (killed before the switch)', () => {
    const { file, secret } = converted()
    linkSync(file, plaintextPath(file))
    recoverSqliteConversion(file)
    expect(existsSync(plaintextPath(file))).toBe(false)
    const db = new Plain(file, { readonly: true })
    expect(db.prepare('select v from kv where k = ?').get('k')).toEqual({ v: secret })
    db.close()
  })

  it('erases the replaced plaintext once the encrypted file is in place (killed after the switch)', () => {
    const { dir, file, key, secret } = converted()
    const copy = join(dir, 'copy.db')
    writeFileSync(copy, readFileSync(file))
    encryptSqliteFile(file, key, { busyTimeoutMs: 1000 })
    // the state a kill between the switch and the erase leaves
    linkSync(copy, plaintextPath(file))
    rmSync(copy)
    expect(readFileSync(plaintextPath(file)).includes(secret)).toBe(true)
    const done = recoverSqliteConversion(file)
    expect(done.join('\n')).toContain('erased')
    expect(existsSync(plaintextPath(file))).toBe(false)
    const db = keyed(file, key, { readonly: true })
    expect(db.prepare('select v from kv where k = ?').get('k')).toEqual({ v: secret })
    db.close()
  })

  it('refuses to touch a plaintext copy that is all there is', () => {
    const { file } = converted()
    linkSync(file, plaintextPath(file))
    rmSync(file)
    rmSync(`${file}-wal`, { force: true })
    expect(() => recoverSqliteConversion(file)).toThrow(/is in the way.*missing/)
    expect(existsSync(plaintextPath(file))).toBe(true)
  })
})
