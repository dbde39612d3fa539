import { spawn } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import Plain from 'better-sqlite3'
import SQLite from 'better-sqlite3-multiple-ciphers'
import { afterAll, describe, expect, it } from 'vitest'
import { MasterKey } from '../src/crypto/master-key.js'
import { sqliteFileState } from '../src/store/sqlite-cipher.js'
import { ENCRYPT_STEPS } from '../src/store/sqlite-encrypt.js'
import { fileKeyPath } from '../src/store/sqlite-file-key.js'
import {
  cofferEnv,
  cofferFails,
  openCofferSqliteFile,
  REPO_ROOT,
  runCoffer,
} from './helpers/processes.js'
import { decryptSqlcipherFile } from './helpers/sqlcipher.js'
import { testDialect } from './helpers/store.js'

/**
 * The embedded database's encryption through real processes (issue 22, part 1): the conversion
 * of a data folder written by the previous release survives a SIGKILL at each of its steps (the
 * database at its name is whole at every moment, and the next `coffer db encrypt` finishes with
 * every row there and no plaintext left), `coffer db key --print` prints what opens the file with
 * standard tooling, and `coffer keys rotate` re-wraps the file key without re-keying the file.
 */
const FIXTURE = join(import.meta.dirname, 'fixtures', 'previous-release', 'sqlite', 'datadir')
const TABLES = ['accounts', 'users', 'vaults', 'documents', 'blobs', 'data_keys', 'search_index']
/** Values the previous release wrote in plaintext into its file (the scan must find none). */
const PLAINTEXT = ['alice', 'Carol', 'CREATE TABLE', '01a21448-de1e-703e-819d-67b20ab9bbbd']

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function fixtureFolder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-dbcrypt-'))
  dirs.push(dir)
  cpSync(FIXTURE, dir, { recursive: true })
  return dir
}

function counts(db: { prepare(sql: string): { get(): unknown } }): Record<string, number> {
  return Object.fromEntries(
    TABLES.map((t) => [t, (db.prepare(`select count(*) as n from ${t}`).get() as { n: number }).n]),
  )
}

/** Which of the values occur in any file under the folder, in UTF-8, UTF-16LE or hex. */
function plaintextIn(dir: string, values: string[]): string[] {
  const hits: string[] = []
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    const bytes = readFileSync(path)
    for (const v of values) {
      for (const needle of [
        Buffer.from(v),
        Buffer.from(v, 'utf16le'),
        Buffer.from(v).toString('hex'),
      ])
        if (bytes.includes(needle)) hits.push(`${v} in ${path}`)
    }
  }
  return hits
}

/** Runs the start-up preparation in a process that SIGKILLs itself after `step`. */
function runUntilKilled(dir: string, step: string): Promise<NodeJS.Signals | null> {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  const script = fileURLToPath(new URL('./helpers/encrypt-and-die.ts', import.meta.url))
  const child = spawn(process.execPath, ['--import', tsx, script, step], {
    cwd: REPO_ROOT,
    env: cofferEnv({ COFFER_DATA_DIR: dir }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout.on('data', (c) => (out += c))
  child.stderr.on('data', (c) => (out += c))
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      if (signal === null) reject(new Error(`not killed (exit ${code}): ${out}`))
      else resolve(signal)
    })
  })
}

describe.skipIf(testDialect !== 'sqlite')('converting a previous release’s data folder', () => {
  // Counted on a copy: even a read-only open leaves -wal and -shm files beside the fixture.
  const original = (() => {
    const db = new Plain(join(fixtureFolder(), 'coffer.db'), { readonly: true })
    try {
      return counts(db)
    } finally {
      db.close()
    }
  })()

  it('finds the plaintext values in the fixture (the scan can see)', () => {
    const dir = fixtureFolder()
    expect(sqliteFileState(join(dir, 'coffer.db'))).toBe('plaintext')
    expect(plaintextIn(dir, PLAINTEXT).length).toBeGreaterThanOrEqual(PLAINTEXT.length)
    expect(original.documents).toBe(3)
  })

  for (const step of ['key-file', ...ENCRYPT_STEPS]) {
    it(`killed after step "${step}": the database is whole, and \`coffer db encrypt\` finishes`, async () => {
      const dir = fixtureFolder()
      const file = join(dir, 'coffer.db')
      expect(await runUntilKilled(dir, step)).toBe('SIGKILL')
      // whole at its name, whichever it is now
      const state = sqliteFileState(file)
      const killed =
        state === 'plaintext'
          ? new Plain(file, { readonly: true })
          : openCofferSqliteFile(file, { readonly: true })
      try {
        expect(counts(killed)).toEqual(original)
        expect(killed.pragma('quick_check', { simple: true })).toBe('ok')
      } finally {
        killed.close()
      }
      expect(state).toBe(['renamed', 'erased'].includes(step) ? 'encrypted' : 'plaintext')

      const { stdout } = await runCoffer(['db', 'encrypt'], { COFFER_DATA_DIR: dir })
      const report = JSON.parse(stdout)
      expect(report).toMatchObject({ encrypted: true, key_file: fileKeyPath(file) })
      expect(report.was).toBe(state)
      expect(sqliteFileState(file)).toBe('encrypted')
      for (const leftover of [
        'coffer.db.encrypting',
        'coffer.db.plaintext',
        'coffer.db-wal.plaintext',
      ])
        expect(existsSync(join(dir, leftover)), leftover).toBe(false)
      expect(plaintextIn(dir, PLAINTEXT)).toEqual([])
      const db = openCofferSqliteFile(file, { readonly: true })
      try {
        expect(counts(db)).toEqual(original)
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
      } finally {
        db.close()
      }
    }, 120_000)
  }
})

describe.skipIf(testDialect !== 'sqlite')('coffer db key', () => {
  it('prints the settings, and the key only with --print (audited); the recipes open the file', async () => {
    const dir = fixtureFolder()
    const env = { COFFER_DATA_DIR: dir }
    const file = join(dir, 'coffer.db')
    // converted at this first open
    const quiet = JSON.parse((await runCoffer(['db', 'key'], env)).stdout)
    expect(quiet).toMatchObject({ cipher: 'sqlcipher', legacy: 4, page_size: 4096 })
    expect(quiet.key).toBeUndefined()
    const printed = JSON.parse((await runCoffer(['db', 'key', '--print'], env)).stdout)
    expect(printed.key).toMatch(/^x'[0-9a-f]{64}'$/)
    expect(JSON.stringify(quiet)).not.toContain(printed.key.slice(2, 66))
    const master = MasterKey.fromBase64(readFileSync(join(dir, 'master.key'), 'utf8'))
    expect(printed.master_key_fingerprint).toBe(master.id)

    // the SQLite3MultipleCiphers lines, verbatim, open it
    const db = new SQLite(file, { readonly: true })
    try {
      for (const line of printed.sqlite3mc as string[]) {
        if (line.startsWith('PRAGMA')) db.exec(line)
      }
      expect(db.prepare('select count(*) as n from documents').get()).toEqual({ n: 3 })
    } finally {
      db.close()
    }
    // and the key is SQLCipher 4's raw key (an independent reader of the format)
    const raw = Buffer.from((printed.key as string).slice(2, 66), 'hex')
    expect(() => decryptSqlcipherFile(file, raw)).not.toThrow()

    const trail = openCofferSqliteFile(file, { readonly: true })
    try {
      const ops = (
        trail
          .prepare(`select operation from audit_events where operation like 'cli.db.%'`)
          .all() as {
          operation: string
        }[]
      ).map((r) => r.operation)
      expect(ops).toEqual(['cli.db.key.print'])
    } finally {
      trail.close()
    }
    // on an encrypted file `db encrypt` has nothing to do
    const again = JSON.parse((await runCoffer(['db', 'encrypt'], env)).stdout)
    expect(again.was).toBe('encrypted')
    // usage and PostgreSQL
    expect((await cofferFails(['db', 'key', '--show'], env)).stderr).toContain('usage')
    const pg = await cofferFails(['db', 'encrypt'], {
      ...env,
      COFFER_DATABASE_URL: 'postgres://nobody@127.0.0.1:9/none',
    })
    expect(pg.stderr).toContain('PostgreSQL')
  }, 120_000)
})

describe.skipIf(testDialect !== 'sqlite')('the file key and master key rotation', () => {
  it('a node with the previous key opens it; rotate re-wraps it; the file is never re-keyed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-dbcrypt-rot-'))
    dirs.push(dir)
    const [a, b] = [MasterKey.generate(), MasterKey.generate()]
    const onA = { COFFER_DATA_DIR: dir, COFFER_MASTER_KEY: a.toBase64() }
    await runCoffer(['account', 'create'], onA)
    const keyOf = async (env: Record<string, string>) =>
      JSON.parse((await runCoffer(['db', 'key', '--print'], env)).stdout).key as string
    const fileKey = await keyOf(onA)
    const file = join(dir, 'coffer.db')
    const wrappedBy = () =>
      JSON.parse(readFileSync(fileKeyPath(file), 'utf8')).master_key_fingerprint
    expect(wrappedBy()).toBe(a.id)

    // B current, A previous: the file key (still under A) opens
    const both = {
      ...onA,
      COFFER_MASTER_KEY: b.toBase64(),
      COFFER_MASTER_KEY_PREVIOUS: a.toBase64(),
    }
    expect(JSON.parse((await runCoffer(['audit', 'verify'], both)).stdout).ok).toBe(true)
    const rotated = JSON.parse((await runCoffer(['keys', 'rotate'], both)).stdout)
    expect(rotated).toMatchObject({ file_key: 'rewrapped', previous_may_be_retired: true })
    expect(wrappedBy()).toBe(b.id)

    // B alone opens it, with the same file key: the database was not re-keyed
    const onB = { COFFER_DATA_DIR: dir, COFFER_MASTER_KEY: b.toBase64() }
    expect(await keyOf(onB)).toBe(fileKey)
    const again = JSON.parse((await runCoffer(['keys', 'rotate'], both)).stdout)
    expect(again.file_key).toBe('current')
    // A alone no longer does, and says why
    const refused = await cofferFails(['audit', 'verify'], onA)
    expect(refused.stderr).toMatch(/does not unlock this database: its file key/)
    expect(refused.stderr).toContain(b.id)
  }, 180_000)
})
