import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { pgConnection, pgTlsSettings } from './pg-tls.js'

const dir = mkdtempSync(join(tmpdir(), 'coffer-pgtls-'))
const ca = join(dir, 'ca.pem')
writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n')
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const URL_BASE = 'postgres://coffer:s3cret@db.example:5432/coffer'
const settings = (query: string) => {
  const problems: string[] = []
  return { ...pgTlsSettings(`${URL_BASE}${query}`, problems), problems }
}

describe('sslmode in COFFER_DATABASE_URL (libpq meanings)', () => {
  it('reads each mode; require with a root certificate checks the chain', () => {
    expect(settings('')).toEqual({ mode: 'disable', rootCert: undefined, problems: [] })
    for (const mode of ['disable', 'require', 'verify-ca', 'verify-full'])
      expect(settings(`?sslmode=${mode}`)).toMatchObject({ mode, problems: [] })
    expect(settings(`?sslmode=require&sslrootcert=${ca}`)).toMatchObject({
      mode: 'verify-ca',
      rootCert: ca,
    })
    expect(settings('?sslmode=verify-full&sslrootcert=system')).toMatchObject({
      mode: 'verify-full',
      rootCert: undefined,
    })
    // node-postgres' own switch keeps its old meaning
    expect(settings('?ssl=true')).toMatchObject({ mode: 'verify-full', problems: [] })
    expect(settings('?ssl=false')).toMatchObject({ mode: 'disable', problems: [] })
  })

  it('refuses a fallback to clear text, unknown modes, client certificates; never names the URL', () => {
    const all = [
      settings('?sslmode=prefer'),
      settings('?sslmode=allow'),
      settings('?sslmode=yes'),
      settings('?sslmode=verify-full&sslcert=/c.pem&sslkey=/k.pem'),
      settings('?ssl=maybe'),
      settings(`?sslrootcert=${ca}`),
    ]
    for (const s of all) {
      expect(s.problems.length).toBeGreaterThan(0)
      for (const p of s.problems) {
        expect(p).toMatch(/^COFFER_DATABASE_URL/)
        expect(p).not.toContain('s3cret')
      }
    }
    expect(all[0]?.problems[0]).toContain('fall back')
    expect(all[3]?.problems).toHaveLength(2)
  })

  it('hands node-postgres the URL without its TLS parameters and the ssl option they mean', () => {
    expect(pgConnection(URL_BASE)).toEqual({ connectionString: URL_BASE, ssl: false })
    const required = pgConnection(`${URL_BASE}?sslmode=require&application_name=x`)
    expect(required.connectionString).toBe(`${URL_BASE}?application_name=x`)
    expect(required.ssl).toEqual({ rejectUnauthorized: false })
    const full = pgConnection(`${URL_BASE}?sslmode=verify-full&sslrootcert=${ca}`)
    expect(full.connectionString).toBe(URL_BASE)
    expect(full.ssl).toMatchObject({
      rejectUnauthorized: true,
      ca: expect.stringContaining('BEGIN'),
    })
    expect(full.ssl && 'checkServerIdentity' in full.ssl).toBe(false)
    const chain = pgConnection(`${URL_BASE}?sslmode=verify-ca&sslrootcert=${ca}`)
    expect(chain.ssl && typeof chain.ssl.checkServerIdentity).toBe('function')
    expect(() =>
      pgConnection(`${URL_BASE}?sslmode=verify-full&sslrootcert=${dir}/none.pem`),
    ).toThrow(/sslrootcert .*none\.pem cannot be read \(ENOENT\)/)
    expect(() => pgConnection(`${URL_BASE}?sslmode=prefer`)).toThrow(/fall back/)
  })
})
