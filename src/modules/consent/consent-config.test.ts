import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../config.js'
import { openStore, type Store } from '../../store/db.js'
import { migrateToLatest } from '../../store/migrate.js'
import { loadConsentSecret } from './consent-secret.js'

const dirs: string[] = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-consent-secret-'))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return e.problems
    throw e
  }
  return []
}

describe('consent settings', () => {
  it('default to port 8081 on COFFER_HOST, both listeners, 90 s, a secret file in the data folder', () => {
    const c = loadConfig({ COFFER_DATA_DIR: '/srv/coffer', COFFER_HOST: '10.0.0.1' })
    expect(c.consentPort).toBe(8081)
    expect(c.consentHost).toBe('10.0.0.1')
    expect(c.serve).toBe('both')
    expect(c.storefrontMaxSkewSeconds).toBe(90)
    expect(c.storefrontSecret).toBeUndefined()
    expect(c.consentJwtSecret).toBeUndefined()
    expect(c.consentJwtSecretFile).toBe('/srv/coffer/consent-jwt.key')
  })

  it('reads every variable', () => {
    const secret = 's'.repeat(32)
    const c = loadConfig({
      COFFER_CONSENT_PORT: '9091',
      COFFER_CONSENT_HOST: '0.0.0.0',
      COFFER_SERVE: 'consent',
      COFFER_STOREFRONT_SECRET: 'shh',
      COFFER_STOREFRONT_MAX_SKEW_SECONDS: '300',
      COFFER_CONSENT_JWT_SECRET: secret,
      COFFER_CONSENT_JWT_SECRET_FILE: '/etc/coffer/consent.key',
    })
    expect(c).toMatchObject({
      consentPort: 9091,
      consentHost: '0.0.0.0',
      serve: 'consent',
      storefrontSecret: 'shh',
      storefrontMaxSkewSeconds: 300,
      consentJwtSecret: secret,
      consentJwtSecretFile: '/etc/coffer/consent.key',
    })
  })

  it('lists every bad value', () => {
    expect(
      problems({
        COFFER_CONSENT_PORT: '70000',
        COFFER_SERVE: 'all',
        COFFER_CONSENT_JWT_SECRET: 'short',
        COFFER_STOREFRONT_MAX_SKEW_SECONDS: '0',
      }),
    ).toEqual([
      'COFFER_SERVE must be both, api or consent',
      'COFFER_CONSENT_JWT_SECRET must be at least 32 characters',
      'COFFER_STOREFRONT_MAX_SKEW_SECONDS must be an integer from 1 to 86400',
      'COFFER_CONSENT_PORT must be a port number',
    ])
  })
})

describe('loadConsentSecret', () => {
  async function sqlite(): Promise<Store> {
    const store = openStore({ url: ':memory:' })
    await migrateToLatest(store.db)
    return store
  }

  it('prefers the configured secret and generates nothing', async () => {
    const dir = tempDir()
    const store = await sqlite()
    const secret = 'c'.repeat(40)
    const config = loadConfig({ COFFER_DATA_DIR: dir, COFFER_CONSENT_JWT_SECRET: secret })
    expect(await loadConsentSecret(config, store, { generate: true })).toEqual({
      secret,
      generated: false,
    })
    expect(existsSync(config.consentJwtSecretFile)).toBe(false)
    await store.close()
  })

  it('generates a 0600 file once on SQLite, then reads it back', async () => {
    const store = await sqlite()
    const config = loadConfig({ COFFER_DATA_DIR: tempDir() })
    const first = await loadConsentSecret(config, store, { generate: true })
    expect(first.generated).toBe(true)
    expect(first.secret.length).toBeGreaterThanOrEqual(43)
    expect(statSync(config.consentJwtSecretFile).mode & 0o777).toBe(0o600)
    expect(readFileSync(config.consentJwtSecretFile, 'utf8').trim()).toBe(first.secret)
    expect(await loadConsentSecret(config, store, { generate: true })).toEqual({
      secret: first.secret,
      generated: false,
    })
    await store.close()
  })

  it('refuses a short secret file, a missing one when it may not generate, and PostgreSQL', async () => {
    const store = await sqlite()
    const config = loadConfig({ COFFER_DATA_DIR: tempDir() })
    await expect(loadConsentSecret(config, store, { generate: false })).rejects.toThrow(
      /no consent secret/,
    )
    writeFileSync(config.consentJwtSecretFile, 'too short\n')
    await expect(loadConsentSecret(config, store, { generate: true })).rejects.toThrow(
      /at least 32 characters/,
    )
    const pg = { ...store, dialect: 'postgres' as const }
    const other = loadConfig({ COFFER_DATA_DIR: tempDir() })
    await expect(loadConsentSecret(other, pg, { generate: true })).rejects.toThrow(/PostgreSQL/)
    await store.close()
  })

  it('never generates a new secret for a database that holds consent records', async () => {
    const store = await sqlite()
    await store.db
      .insertInto('consent_records')
      .values({
        shop: 's',
        consumer_digest: 'd',
        consumer_sealed: 'x',
        consumer_kind: 'email',
        consent_analytics: null,
        consent_advertising: null,
        consent_personalization: null,
        consent_targeted_advertising: null,
        opted_out: null,
        choice_at: null,
        token_epoch: 0,
        last_provider: 'email',
        last_privacy_center_id: 'p',
        last_client_id: null,
        created_at: 'now',
        updated_at: 'now',
      })
      .execute()
    const config = loadConfig({ COFFER_DATA_DIR: tempDir() })
    await expect(loadConsentSecret(config, store, { generate: true })).rejects.toThrow(
      /holds consent records/,
    )
    expect(existsSync(config.consentJwtSecretFile)).toBe(false)
    await store.close()
  })
})
