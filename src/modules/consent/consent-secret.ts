import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import type { Config } from '../../config.js'
import { randomSecret } from '../../crypto/secrets.js'
import type { Store } from '../../store/db.js'
import { hasAnyRecord } from './consent.repo.js'

export const MIN_SECRET_LENGTH = 32

/**
 * Finds the consent secret (the HS256 key of consent tokens, and the root of the consumer
 * digest and sealing keys): COFFER_CONSENT_JWT_SECRET, else the secret file. Like the master
 * key, a file is generated (mode 0600) only for the embedded SQLite default: nodes sharing a
 * PostgreSQL database must share one secret, so there it must be configured. A database that
 * already holds consent records never gets a new secret: their tokens and lookups need the old.
 */
export async function loadConsentSecret(
  config: Config,
  store: Store,
  options: { generate: boolean },
): Promise<{ secret: string; generated: boolean }> {
  if (config.consentJwtSecret) return { secret: config.consentJwtSecret, generated: false }
  const file = config.consentJwtSecretFile
  if (existsSync(file)) {
    const secret = readFileSync(file, 'utf8').trim()
    if (secret.length < MIN_SECRET_LENGTH) {
      throw new Error(`${file} must hold at least ${MIN_SECRET_LENGTH} characters`)
    }
    return { secret, generated: false }
  }
  const missing = `no consent secret: set COFFER_CONSENT_JWT_SECRET or COFFER_CONSENT_JWT_SECRET_FILE`
  if (!options.generate) throw new Error(missing)
  if (store.dialect !== 'sqlite') {
    throw new Error(`${missing} (required with PostgreSQL: every node needs the same one)`)
  }
  if (await hasAnyRecord(store.db)) {
    throw new Error(
      `${missing}: this database holds consent records made with a secret that is gone (${file})`,
    )
  }
  const secret = randomSecret(32)
  const temp = `${file}.${process.pid}.tmp`
  writeFileSync(temp, `${secret}\n`, { mode: 0o600, flag: 'wx' })
  renameSync(temp, file)
  return { secret, generated: true }
}
