import { existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TEST_CONSENT_SECRET } from '../helpers/consent.js'
import {
  cofferFails,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
  waitForOutput,
} from '../helpers/processes.js'
import { testDialect } from '../helpers/store.js'
import { httpsRequest, json, plainRequest } from '../helpers/tls-clients.js'
import { makeTestPki, type TestPki } from '../helpers/tls-pki.js'

/**
 * Issue 19: secure by default in production. With COFFER_ENV=production a listener off
 * loopback without TLS refuses to start, before anything is written, naming the two ways out;
 * either way out starts; loopback and development keep plain HTTP. Real `coffer serve` processes.
 */
describe(`coffer serve in production: no credentials in clear (${testDialect})`, () => {
  let db: SharedDatabase
  let pki: TestPki

  beforeAll(async () => {
    db = await sharedDatabase()
    pki = makeTestPki()
  })
  afterAll(async () => {
    pki?.close()
    await db?.drop()
  })

  const PRODUCTION = { COFFER_ENV: 'production', COFFER_SERVE: 'api' }
  const TLS = () => ({
    COFFER_TLS_CERT_FILE: pki.leaf.certFile,
    COFFER_TLS_KEY_FILE: pki.leaf.keyFile,
  })

  /** Nothing in the node's folder, and no table in the database (not even migrations ran). */
  async function expectNothingWritten(dir: string): Promise<void> {
    expect(readdirSync(dir)).toEqual([])
    const env = db.env(dir)
    if (testDialect === 'sqlite') {
      expect(existsSync(env.COFFER_DATABASE_URL as string)).toBe(false)
      return
    }
    const store = db.open()
    try {
      const { rows } = await sql<{ n: string }>`
        select count(*) as n from information_schema.tables where table_schema = current_schema()`.execute(
        store.db,
      )
      expect(Number(rows[0]?.n)).toBe(0)
    } finally {
      await store.close()
    }
  }

  async function refused(extra: Record<string, string>): Promise<string> {
    const dir = db.dataDir()
    const failed = await cofferFails(['serve'], { ...db.env(dir), COFFER_PORT: '0', ...extra })
    expect(failed.code).toBe(1)
    await expectNothingWritten(dir)
    return failed.stderr
  }

  it('refuses the main API on 0.0.0.0 without TLS, naming both ways out', async () => {
    const stderr = await refused({ ...PRODUCTION, COFFER_HOST: '0.0.0.0' })
    expect(stderr).toContain('invalid configuration:')
    expect(stderr).toContain(
      'COFFER_HOST is 0.0.0.0, not a loopback address, and COFFER_ENV=production: the main API would carry credentials and data in clear.',
    )
    expect(stderr).toContain('configure TLS (COFFER_TLS_CERT_FILE and COFFER_TLS_KEY_FILE)')
    expect(stderr).toContain(
      'COFFER_TLS_TERMINATED_BY_PROXY=true (which also needs COFFER_TRUST_PROXY naming that proxy)',
    )
  }, 30_000)

  it('refuses the consent API off loopback without TLS (its own listener)', async () => {
    const stderr = await refused({
      COFFER_ENV: 'production',
      COFFER_SERVE: 'consent',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_HOST: '::',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
    })
    expect(stderr).toContain('COFFER_CONSENT_HOST (by default COFFER_HOST) is ::, not a loopback')
    expect(stderr).toContain('COFFER_CONSENT_TLS_CERT_FILE and COFFER_CONSENT_TLS_KEY_FILE')
    expect(stderr).not.toContain('COFFER_HOST is')
  }, 30_000)

  it('refuses COFFER_TLS_TERMINATED_BY_PROXY without COFFER_TRUST_PROXY', async () => {
    const stderr = await refused({
      ...PRODUCTION,
      COFFER_HOST: '0.0.0.0',
      COFFER_TLS_TERMINATED_BY_PROXY: 'true',
    })
    expect(stderr).toContain(
      'COFFER_TLS_TERMINATED_BY_PROXY=true needs COFFER_TRUST_PROXY: the address (or hop count) of the proxy that terminates TLS',
    )
  }, 30_000)

  it('refuses a metrics listener off loopback without its token', async () => {
    const stderr = await refused({
      ...PRODUCTION,
      COFFER_METRICS_PORT: '0',
      COFFER_METRICS_HOST: '0.0.0.0',
    })
    expect(stderr).toContain(
      'COFFER_METRICS_HOST is 0.0.0.0, not a loopback address, and COFFER_ENV=production: the metrics listener (plain HTTP) must then ask for a bearer token: set COFFER_METRICS_TOKEN',
    )
  }, 30_000)

  it('refuses a pair that does not load, naming the setting', async () => {
    const garbage = join(pki.dir, 'not-a-cert.pem')
    writeFileSync(garbage, 'hello\n')
    const mismatch = await refused({
      ...PRODUCTION,
      COFFER_HOST: '0.0.0.0',
      COFFER_TLS_CERT_FILE: pki.leaf2.certFile,
      COFFER_TLS_KEY_FILE: pki.leaf.keyFile,
    })
    expect(mismatch).toContain(
      `coffer: cannot serve TLS on the main API: the key in COFFER_TLS_KEY_FILE (${pki.leaf.keyFile}) does not match the certificate in COFFER_TLS_CERT_FILE (${pki.leaf2.certFile})`,
    )
    const notPem = await refused({ ...TLS(), COFFER_TLS_CERT_FILE: garbage })
    expect(notPem).toContain(`COFFER_TLS_CERT_FILE (${garbage}) holds no PEM certificate`)
    const missing = await refused({ ...TLS(), COFFER_TLS_KEY_FILE: join(pki.dir, 'nope.key') })
    expect(missing).toContain('there is no such file (ENOENT)')
    // Never the content of a file.
    for (const stderr of [mismatch, notPem, missing]) expect(stderr).not.toMatch(/BEGIN|hello/)
    // Three processes: as long as the other cases that start several.
  }, 60_000)

  it('starts on 0.0.0.0 with TLS', async () => {
    const dir = db.dataDir()
    const server = await startServerProcess({
      ...db.env(dir),
      ...PRODUCTION,
      ...TLS(),
      COFFER_HOST: '0.0.0.0',
    })
    try {
      expect(server.url).toMatch(/^https:\/\//)
      // (The database is shared by this file's processes: probes, not credentials.)
      const health = await httpsRequest(pki, `${server.url}/healthz`)
      expect(health.status).toBe(200)
      expect(json(health).status).toBe('ok')
      expect(health.headers['strict-transport-security']).toBe('max-age=31536000')
    } finally {
      await server.stop()
    }
  }, 30_000)

  it('starts on 0.0.0.0 behind a proxy declared to terminate TLS, trusting its header', async () => {
    const dir = db.dataDir()
    const server = await startServerProcess({
      ...db.env(dir),
      ...PRODUCTION,
      // Both listeners: the consent API trusts the same proxy and sends the same HSTS.
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
      COFFER_HOST: '0.0.0.0',
      COFFER_TLS_TERMINATED_BY_PROXY: 'true',
      COFFER_TRUST_PROXY: '127.0.0.1',
      COFFER_HSTS_MAX_AGE_SECONDS: '600',
    })
    try {
      expect(server.url).toMatch(/^http:\/\//)
      const consentUrl = (
        await waitForOutput(server, /Consent API listening at (http:\/\/[^\s"]+)/)
      )[1] as string
      for (const url of [server.url, consentUrl]) {
        const viaProxy = await plainRequest(`${url}/healthz`, { 'x-forwarded-proto': 'https' })
        expect(viaProxy.status, url).toBe(200)
        expect(viaProxy.headers['strict-transport-security'], url).toBe('max-age=600')
        const direct = await plainRequest(`${url}/healthz`)
        expect(direct.headers['strict-transport-security'], url).toBeUndefined()
      }
    } finally {
      await server.stop()
    }
  }, 30_000)

  it('keeps plain HTTP on loopback in production, and anywhere in development', async () => {
    for (const env of [
      { ...PRODUCTION, COFFER_HOST: '127.0.0.1' },
      { ...PRODUCTION, COFFER_HOST: 'localhost' },
      { COFFER_SERVE: 'api', COFFER_HOST: '0.0.0.0' },
    ]) {
      const dir = db.dataDir()
      const server = await startServerProcess({ ...db.env(dir), ...env })
      try {
        expect(server.url).toMatch(/^http:\/\//)
        const health = await plainRequest(`${server.url}/healthz`)
        expect(health.status, JSON.stringify(env)).toBe(200)
        expect(json(health).status).toBe('ok')
        expect(health.headers['strict-transport-security']).toBeUndefined()
      } finally {
        await server.stop()
      }
    }
  }, 60_000)
})
