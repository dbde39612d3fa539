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
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from '../helpers/processes.js'
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

/** The same through `coffer serve` itself: COFFER_LOG_LEVEL=trace, both listeners, one log. */
describe('`coffer serve` at COFFER_LOG_LEVEL=trace logs no credential', () => {
  let db: SharedDatabase
  let server: ServerProcess
  let consentUrl: string
  let apiKey: string

  beforeAll(async () => {
    db = await sharedDatabase()
    const dir = db.dataDir()
    server = await startServerProcess({
      ...db.env(dir),
      COFFER_LOG_LEVEL: 'trace',
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
    })
    // The main API is logged as listening first; the consent listener follows.
    for (let i = 0; i < 100 && !consentUrl; i++) {
      const m = /Consent API listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(server.output())
      if (m) consentUrl = m[1] as string
      else await new Promise((r) => setTimeout(r, 100))
    }
    apiKey = bootstrapCredentials(dir).api_key
  }, 60_000)

  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  it('multipart, JSON and consent requests leave no credential in the output', async () => {
    const authorization = basicHeader(apiKey)
    const cookie = 'session=process-cookie-canary-83d1'
    const signature = 'processsignaturecanary0123456789'
    const multipart = multipartBody({ name: 'process-vault' })
    const statuses: number[] = []
    for (const [type, body] of [
      [multipart.contentType, multipart.body],
      ['application/json', JSON.stringify({ name: 'process-vault-json' })],
    ] as const) {
      const res = await fetch(`${server.url}/v1/vaults`, {
        method: 'POST',
        headers: { authorization, cookie, 'content-type': type },
        body,
      })
      statuses.push(res.status)
    }
    expect(statuses).toEqual([200, 200])
    expect(consentUrl).toBeDefined()
    const consent = await fetch(
      `${consentUrl}${CONSENT}?shop=a.myshopify.com&signature=${signature}`,
      {
        headers: { authorization, cookie },
      },
    )
    await consent.arrayBuffer()
    // The request line is written after the answer is sent: wait for it.
    for (let i = 0; i < 50 && !server.output().includes('/api/v1/cmp/consent'); i++)
      await new Promise((r) => setTimeout(r, 100))
    const log = server.output()
    expect(log).toContain('Providing options to busboy')
    expect(log).toContain('"route":"/api/v1/cmp/consent"')
    for (const [label, value] of Object.entries({
      'API key': apiKey,
      'Basic credential in base64': authorization.slice('Basic '.length),
      cookie,
      'consent signature': signature,
    })) {
      expect(log.includes(value), `${label} in the log`).toBe(false)
    }
  })
})
