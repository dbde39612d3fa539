import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { FsBlobStore } from '../../src/blob/fs-blob-store.js'
import { buildConsentApp } from '../../src/consent-app.js'
import { MasterKey } from '../../src/crypto/master-key.js'
import { createDeps } from '../../src/deps.js'
import type { Store } from '../../src/store/db.js'
import { basicHeader, multipartBody, TEST_ARGON2 } from '../helpers/app.js'
import { CONSENT, TEST_CONSENT_SECRET } from '../helpers/consent.js'
import { openTestStore } from '../helpers/store.js'

/**
 * Finding 10 of the security review: at trace level `@fastify/multipart` logged the whole request
 * headers, Authorization included. Every listener (main API, consent API sharing its logger,
 * consent API on its own) runs on a real socket at trace level with its log captured, and the
 * whole log is scanned for each secret a request carried.
 */
describe('logs at trace level hold no credential', () => {
  let store: Store
  let blobDir: string
  let main: FastifyInstance
  let consentShared: FastifyInstance
  let consentAlone: FastifyInstance
  const lines: string[] = []
  const stream = { write: (line: string) => void lines.push(line) }
  const secrets: Record<string, string> = {}

  const urlOf = (app: FastifyInstance) =>
    `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`

  beforeAll(async () => {
    store = await openTestStore()
    blobDir = mkdtempSync(join(tmpdir(), 'coffer-logs-'))
    const deps = createDeps(store, {
      masterKey: MasterKey.generate(),
      blobStore: new FsBlobStore(blobDir),
      argon2: TEST_ARGON2,
      consent: {
        secret: TEST_CONSENT_SECRET,
        production: false,
        storefrontSecret: undefined,
        maxSkewSeconds: 90,
      },
    })
    // As `coffer serve` builds them: the consent app logs through the main app's logger, or
    // (`--only consent`) through its own.
    main = await buildApp(deps, { logger: { level: 'trace', stream } })
    consentShared = await buildConsentApp(deps, { loggerInstance: main.log })
    consentAlone = await buildConsentApp(deps, { logger: { level: 'trace', stream } })
    for (const app of [main, consentShared, consentAlone])
      await app.listen({ host: '127.0.0.1', port: 0 })

    const admin = await deps.accounts.createWithAdmin()
    const authorization = basicHeader(admin.api_key)
    Object.assign(secrets, {
      'API key': admin.api_key,
      'Basic credential in base64': authorization.slice('Basic '.length),
      cookie: 'session=cookie-canary-4f1c',
      'proxy credential': 'Basic cHJveHktY2FuYXJ5LTdhMmU=',
      'x-api-key': 'x-api-key-canary-9d3b',
      'Shopify HMAC': 'shopify-hmac-canary-1e8a',
      'Shopify token': 'shopify-token-canary-62c0',
      'consent signature': 'abcdef0123456789signaturecanary',
    })
    const headers = {
      authorization,
      cookie: secrets.cookie as string,
      'proxy-authorization': secrets['proxy credential'] as string,
      'x-api-key': secrets['x-api-key'] as string,
      'x-shopify-hmac-sha256': secrets['Shopify HMAC'] as string,
      'x-shopify-access-token': secrets['Shopify token'] as string,
    }
    const api = urlOf(main)
    const multipart = multipartBody({ name: 'logged-vault-multipart' })
    const statuses: number[] = []
    const send = async (url: string, init: RequestInit) => {
      const res = await fetch(url, init)
      await res.arrayBuffer()
      statuses.push(res.status)
    }
    await send(`${api}/v1/vaults`, {
      method: 'POST',
      headers: { ...headers, 'content-type': multipart.contentType },
      body: multipart.body,
    })
    await send(`${api}/v1/vaults`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'logged-vault-json' }),
    })
    await send(`${api}/v1/vaults`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=logged-vault-form',
    })
    // A failing request too: errors are logged with more detail.
    await send(`${api}/v1/vaults/not-a-uuid`, { headers })
    const query = `shop=example.myshopify.com&signature=${secrets['consent signature']}`
    for (const app of [consentShared, consentAlone])
      await send(`${urlOf(app)}${CONSENT}?${query}`, { headers })
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200])
  })

  afterAll(async () => {
    for (const app of [main, consentShared, consentAlone]) await app?.close()
    await store?.close()
    if (blobDir) rmSync(blobDir, { recursive: true, force: true })
  })

  it('the log saw the requests (the multipart trace line included)', () => {
    const log = lines.join('')
    expect(log).toContain('Providing options to busboy')
    expect(log).toContain('"route":"/v1/vaults"')
    expect(log).toContain('"route":"/api/v1/cmp/consent"')
    expect(log).toContain('"authorization":"[Redacted]"')
  })

  it('and none of the secrets any request carried', () => {
    const log = lines.join('')
    for (const [label, value] of Object.entries(secrets)) {
      expect(log.includes(value), `${label} in the log`).toBe(false)
    }
  })
})
