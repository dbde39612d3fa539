import { execFileSync, spawnSync } from 'node:child_process'
import {
  appendFileSync,
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openStore } from '../../src/store/db.js'
import { cofferFails, runCoffer } from '../helpers/processes.js'
import { testDialect } from '../helpers/store.js'
import { makeTestPki, type TestPki } from '../helpers/tls-pki.js'

/**
 * TLS to PostgreSQL as COFFER_DATABASE_URL asks for it (issue 22; store/pg-tls.ts), against a
 * real server: a throwaway PostgreSQL started here with `ssl = on` and a certificate of a CA
 * made here (SAN 127.0.0.1 and localhost), listening on 127.0.0.1 and 127.0.0.2 (a name the
 * certificate does not carry). Runs with the PostgreSQL suite, where PostgreSQL's binaries are;
 * skipped when `initdb` is not installed.
 */
function postgresBin(): string | undefined {
  const base = '/usr/lib/postgresql'
  if (!existsSync(base)) return undefined
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] ? join(base, versions[0], 'bin') : undefined
}

const BIN = postgresBin()

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (!address || typeof address === 'string') throw new Error('no port')
  return address.port
}

/** initdb refuses to run as root: the server runs as the `postgres` user then. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim())
  return { uid: id('-u'), gid: id('-g') }
}

describe.runIf(testDialect === 'postgres' && BIN !== undefined)(
  'TLS to PostgreSQL (a throwaway server with ssl = on)',
  () => {
    let dir: string
    let data: string
    let port: number
    let pki: TestPki
    let started = false
    const user = runAs()

    const pg = (args: string[]) => {
      const r = spawnSync(join(BIN as string, args[0] as string), args.slice(1), {
        ...(user ?? {}),
        encoding: 'utf8',
        timeout: 120_000,
      })
      if (r.status !== 0) throw new Error(`${args[0]} failed: ${r.stderr}${r.stdout}`)
    }
    const url = (host: string, query: string) =>
      `postgres://postgres:not-a-secret-pw@${host}:${port}/postgres${query}`
    /** Whether the store's connection uses TLS (pg_stat_ssl of its own backend). */
    const sslOf = async (connection: string): Promise<boolean> => {
      const store = openStore({ url: connection, pg: { poolSize: 1, connectTimeoutMs: 10_000 } })
      try {
        const { rows } = await sql<{
          ssl: boolean
        }>`select ssl from pg_stat_ssl where pid = pg_backend_pid()`.execute(store.db)
        return rows[0]?.ssl === true
      } finally {
        await store.close()
      }
    }

    beforeAll(async () => {
      pki = makeTestPki()
      dir = mkdtempSync(join(tmpdir(), 'coffer-pgtls-'))
      data = join(dir, 'data')
      mkdirSync(data, { mode: 0o700 })
      if (user) {
        chownSync(dir, user.uid, user.gid)
        chownSync(data, user.uid, user.gid)
      }
      pg(['initdb', '-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'])
      for (const [from, to] of [
        [pki.leaf.certFile, 'server.crt'],
        [pki.leaf.keyFile, 'server.key'],
      ] as const) {
        copyFileSync(from, join(data, to))
        chmodSync(join(data, to), 0o600)
        if (user) chownSync(join(data, to), user.uid, user.gid)
      }
      port = await freePort()
      appendFileSync(
        join(data, 'postgresql.conf'),
        [
          '',
          'ssl = on',
          "ssl_cert_file = 'server.crt'",
          "ssl_key_file = 'server.key'",
          "listen_addresses = '127.0.0.1,127.0.0.2'",
          `port = ${port}`,
          `unix_socket_directories = '${dir}'`,
          'fsync = off',
          '',
        ].join('\n'),
      )
      appendFileSync(join(data, 'pg_hba.conf'), '\nhost all all 127.0.0.0/8 trust\n')
      pg(['pg_ctl', '-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '120', 'start'])
      started = true
    }, 240_000)

    afterAll(() => {
      if (started) pg(['pg_ctl', '-D', data, '-m', 'immediate', '-w', 'stop'])
      if (dir) rmSync(dir, { recursive: true, force: true })
      pki?.close()
    })

    it('verify-full: connects over TLS with the right CA and the name the certificate carries', async () => {
      const ca = `?sslmode=verify-full&sslrootcert=${pki.ca.certFile}`
      expect(await sslOf(url('127.0.0.1', ca))).toBe(true)
      expect(await sslOf(url('localhost', ca))).toBe(true)
    })

    it('verify-full: refuses a certificate of another CA, and a host name it does not carry', async () => {
      await expect(
        sslOf(url('127.0.0.1', `?sslmode=verify-full&sslrootcert=${pki.foreignCa.certFile}`)),
      ).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i)
      await expect(
        sslOf(url('127.0.0.2', `?sslmode=verify-full&sslrootcert=${pki.ca.certFile}`)),
      ).rejects.toThrow(/IP: 127\.0\.0\.2 is not in the cert's list|altnames/i)
      // Node's own CA store does not know the test CA either
      await expect(sslOf(url('127.0.0.1', '?sslmode=verify-full'))).rejects.toThrow(
        /self[- ]signed|unable to (get|verify)/i,
      )
    })

    it('verify-ca checks the chain only; require encrypts without checking; disable does not encrypt', async () => {
      expect(
        await sslOf(url('127.0.0.2', `?sslmode=verify-ca&sslrootcert=${pki.ca.certFile}`)),
      ).toBe(true)
      await expect(
        sslOf(url('127.0.0.2', `?sslmode=verify-ca&sslrootcert=${pki.foreignCa.certFile}`)),
      ).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i)
      expect(await sslOf(url('127.0.0.2', '?sslmode=require'))).toBe(true)
      // libpq: require with a root certificate is verify-ca
      await expect(
        sslOf(url('127.0.0.1', `?sslmode=require&sslrootcert=${pki.foreignCa.certFile}`)),
      ).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i)
      expect(await sslOf(url('127.0.0.1', '?sslmode=disable'))).toBe(false)
      expect(await sslOf(url('127.0.0.1', ''))).toBe(false)
    })

    it('the coffer command connects as the URL says, and says why it cannot, without the password', async () => {
      const good = url('127.0.0.1', `?sslmode=verify-full&sslrootcert=${pki.ca.certFile}`)
      const work = mkdtempSync(join(tmpdir(), 'coffer-pgtls-cli-'))
      try {
        const env = { COFFER_DATA_DIR: work, COFFER_DATABASE_URL: good }
        expect((await runCoffer(['migrate'], env)).stdout).toContain('up to date')
        const bad = await cofferFails(['migrate'], {
          ...env,
          COFFER_DATABASE_URL: url(
            '127.0.0.2',
            `?sslmode=verify-full&sslrootcert=${pki.ca.certFile}`,
          ),
        })
        expect(bad.stderr).toMatch(/127\.0\.0\.2/)
        expect(bad.stderr).not.toContain('not-a-secret-pw')
        const prefer = await cofferFails(['migrate'], {
          ...env,
          COFFER_DATABASE_URL: url('127.0.0.1', '?sslmode=prefer'),
        })
        expect(prefer.stderr).toContain('sslmode=prefer may fall back')
        expect(prefer.stderr).not.toContain('not-a-secret-pw')
      } finally {
        rmSync(work, { recursive: true, force: true })
      }
    }, 120_000)
  },
)
