import { execFile } from 'node:child_process'
import { copyFileSync, mkdtempSync } from 'node:fs'
import https from 'node:https'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TEST_CONSENT_SECRET } from '../helpers/consent.js'
import { dockerStages, healthcheckCommand, read } from '../helpers/deploy-recipe.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
  waitForOutput,
} from '../helpers/processes.js'
import { testDialect } from '../helpers/store.js'
import {
  basic,
  fingerprintOf,
  h2Connect,
  h2Request,
  httpsRequest,
  json,
  servedFingerprint,
} from '../helpers/tls-clients.js'
import { type Issued, makeTestPki, type TestPki } from '../helpers/tls-pki.js'

/**
 * Issue 19 in real `coffer serve` processes: both listeners over TLS (the shared pair and the
 * consent API's own), SIGHUP reloading the pair (and no longer stopping the process), and the
 * graceful shutdown with HTTP/2 sessions open.
 */

const portOf = (url: string) => Number(new URL(url).port)
const execFileAsync = promisify(execFile)

describe(`coffer serve over TLS (${testDialect})`, () => {
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

  async function startBoth(extra: Record<string, string>) {
    const server = await startServerProcess({
      ...db.env(db.dataDir()),
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
      ...extra,
    })
    const consent = await waitForOutput(
      server,
      /Consent API listening at (https?:\/\/127\.0\.0\.1:\d+)/,
    )
    return { server, consentUrl: consent[1] as string }
  }

  it('serves both listeners with the shared pair', async () => {
    const { server, consentUrl } = await startBoth({
      COFFER_TLS_CERT_FILE: pki.leaf.certFile,
      COFFER_TLS_KEY_FILE: pki.leaf.keyFile,
    })
    try {
      expect(server.url).toMatch(/^https:/)
      expect(consentUrl).toMatch(/^https:/)
      expect(await servedFingerprint(pki, portOf(server.url))).toBe(fingerprintOf(pki.leaf.cert))
      expect(await servedFingerprint(pki, portOf(consentUrl))).toBe(fingerprintOf(pki.leaf.cert))
      const ready = await httpsRequest(pki, `${consentUrl}/readyz`)
      expect(ready.status).toBe(200)
      expect(ready.headers['strict-transport-security']).toBe('max-age=31536000')
      // What each listener serves is logged at start: subject and fingerprint, never the key.
      const log = server.output()
      expect(log).toMatch(/"listener":"api","subject":"CN=server-one".*TLS certificate in service/)
      expect(log).toMatch(/"listener":"consent","subject":"CN=server-one"/)
      expect(log).not.toMatch(/PRIVATE KEY/)
    } finally {
      await server.stop()
    }
  }, 60_000)

  it('serves the consent API with its own pair when given one', async () => {
    const { server, consentUrl } = await startBoth({
      COFFER_TLS_CERT_FILE: pki.leaf.certFile,
      COFFER_TLS_KEY_FILE: pki.leaf.keyFile,
      COFFER_CONSENT_TLS_CERT_FILE: pki.consentLeaf.certFile,
      COFFER_CONSENT_TLS_KEY_FILE: pki.consentLeaf.keyFile,
    })
    try {
      expect(await servedFingerprint(pki, portOf(server.url))).toBe(fingerprintOf(pki.leaf.cert))
      expect(await servedFingerprint(pki, portOf(consentUrl))).toBe(
        fingerprintOf(pki.consentLeaf.cert),
      )
      const session = await h2Connect(pki, consentUrl)
      try {
        expect((await h2Request(session, '/healthz')).status).toBe(200)
      } finally {
        session.close()
      }
    } finally {
      await server.stop()
    }
  }, 60_000)

  it('serves only the consent API over TLS when only it has a pair', async () => {
    const { server, consentUrl } = await startBoth({
      COFFER_CONSENT_TLS_CERT_FILE: pki.consentLeaf.certFile,
      COFFER_CONSENT_TLS_KEY_FILE: pki.consentLeaf.keyFile,
    })
    try {
      expect(server.url).toMatch(/^http:/)
      expect(consentUrl).toMatch(/^https:/)
      expect((await httpsRequest(pki, `${consentUrl}/healthz`)).status).toBe(200)
    } finally {
      await server.stop()
    }
  }, 60_000)
})

describe(`coffer serve: SIGHUP reloads the TLS pair (${testDialect})`, () => {
  let db: SharedDatabase
  let pki: TestPki
  let server: ServerProcess
  let files: { cert: string; key: string }

  const install = (issued: Issued) => {
    copyFileSync(issued.certFile, files.cert)
    copyFileSync(issued.keyFile, files.key)
  }
  const served = () => servedFingerprint(pki, portOf(server.url))

  beforeAll(async () => {
    db = await sharedDatabase()
    pki = makeTestPki()
    const live = mkdtempSync(join(pki.dir, 'live-'))
    files = { cert: join(live, 'cert.pem'), key: join(live, 'key.pem') }
    install(pki.leaf)
    server = await startServerProcess({
      ...db.env(db.dataDir()),
      COFFER_TLS_CERT_FILE: files.cert,
      COFFER_TLS_KEY_FILE: files.key,
      // Only the signal reloads here: what this test is about.
      COFFER_TLS_WATCH: 'false',
    })
  }, 60_000)
  afterAll(async () => {
    await server?.stop()
    pki?.close()
    await db?.drop()
  })

  it('takes a new pair on SIGHUP, keeps the old one when the new one does not load', async () => {
    expect(await served()).toBe(fingerprintOf(pki.leaf.cert))
    install(pki.leaf2)
    // COFFER_TLS_WATCH=false: a change on disk alone does nothing.
    await new Promise((r) => setTimeout(r, 1500))
    expect(await served()).toBe(fingerprintOf(pki.leaf.cert))

    server.child.kill('SIGHUP')
    await waitForOutput(
      server,
      /"reason":"SIGHUP".*"subject":"CN=server-two".*TLS certificate reloaded/,
    )
    expect(await served()).toBe(fingerprintOf(pki.leaf2.cert))
    // SIGHUP did not stop it.
    expect(server.child.exitCode).toBeNull()
    expect(server.output()).not.toMatch(/shutting down/)

    // A key that does not match: refused, logged, the pair in service stays.
    copyFileSync(pki.leaf.keyFile, files.key)
    server.child.kill('SIGHUP')
    await waitForOutput(server, /does not match the certificate.*TLS certificate not reloaded/)
    expect(await served()).toBe(fingerprintOf(pki.leaf2.cert))
    const ready = await httpsRequest(pki, `${server.url}/readyz`)
    expect(ready.status).toBe(200)
    expect(server.output()).not.toMatch(/PRIVATE KEY/)
  }, 60_000)

  it('the image’s HEALTHCHECK probes a TLS listener over HTTPS', async () => {
    const image = dockerStages(read('Dockerfile')).at(-1)?.instructions ?? []
    const [binary, ...args] = healthcheckCommand(image)
    expect(binary).toBe('node')
    const probe = async (env: Record<string, string>) => {
      try {
        await execFileAsync(process.execPath, args, { env: { PATH: process.env.PATH, ...env } })
        return 0
      } catch (e) {
        return (e as { code?: number }).code
      }
    }
    const port = String(portOf(server.url))
    expect(await probe({ COFFER_PORT: port, COFFER_TLS_CERT_FILE: files.cert })).toBe(0)
    // Plain HTTP to the TLS port is not an answer: unhealthy.
    expect(await probe({ COFFER_PORT: port })).toBe(1)
  }, 30_000)
})

describe(`coffer serve: SIGHUP reloads each listener's own pair (${testDialect})`, () => {
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

  it('the consent API takes its new pair on SIGHUP as the main API does, each from its own files', async () => {
    const pairIn = (name: string, issued: Issued) => {
      const folder = mkdtempSync(join(pki.dir, `${name}-`))
      const files = { cert: join(folder, 'cert.pem'), key: join(folder, 'key.pem') }
      copyFileSync(issued.certFile, files.cert)
      copyFileSync(issued.keyFile, files.key)
      return files
    }
    const main = pairIn('main', pki.leaf)
    const consent = pairIn('consent', pki.consentLeaf)
    const server = await startServerProcess({
      ...db.env(db.dataDir()),
      COFFER_SERVE: 'both',
      COFFER_CONSENT_PORT: '0',
      COFFER_CONSENT_JWT_SECRET: TEST_CONSENT_SECRET,
      COFFER_TLS_CERT_FILE: main.cert,
      COFFER_TLS_KEY_FILE: main.key,
      COFFER_CONSENT_TLS_CERT_FILE: consent.cert,
      COFFER_CONSENT_TLS_KEY_FILE: consent.key,
      COFFER_TLS_WATCH: 'false',
    })
    try {
      const consentUrl = (
        await waitForOutput(server, /Consent API listening at (https:\/\/127\.0\.0\.1:\d+)/)
      )[1] as string
      const mainPort = portOf(server.url)
      const consentPort = portOf(consentUrl)
      expect(await servedFingerprint(pki, consentPort)).toBe(fingerprintOf(pki.consentLeaf.cert))
      // The consent pair becomes server-one's, the main one server-two's.
      copyFileSync(pki.leaf.certFile, consent.cert)
      copyFileSync(pki.leaf.keyFile, consent.key)
      copyFileSync(pki.leaf2.certFile, main.cert)
      copyFileSync(pki.leaf2.keyFile, main.key)
      server.child.kill('SIGHUP')
      await waitForOutput(
        server,
        /"listener":"consent","reason":"SIGHUP".*"subject":"CN=server-one".*TLS certificate reloaded/,
      )
      await waitForOutput(
        server,
        /"listener":"api","reason":"SIGHUP".*"subject":"CN=server-two".*TLS certificate reloaded/,
      )
      expect(await servedFingerprint(pki, consentPort)).toBe(fingerprintOf(pki.leaf.cert))
      expect(await servedFingerprint(pki, mainPort)).toBe(fingerprintOf(pki.leaf2.cert))
      expect((await httpsRequest(pki, `${consentUrl}/readyz`)).status).toBe(200)
      expect(server.child.exitCode).toBeNull()
    } finally {
      await server.stop()
    }
  }, 60_000)
})

describe(`coffer serve over TLS: graceful shutdown with HTTP/2 sessions (${testDialect})`, () => {
  let db: SharedDatabase
  let pki: TestPki
  let server: ServerProcess
  let apiKey: string
  const DELAY_MS = 1500
  const GRACE_MS = 20_000

  beforeAll(async () => {
    db = await sharedDatabase()
    pki = makeTestPki()
    const dir = db.dataDir()
    server = await startServerProcess({
      ...db.env(dir),
      COFFER_TLS_CERT_FILE: pki.leaf.certFile,
      COFFER_TLS_KEY_FILE: pki.leaf.keyFile,
      COFFER_SHUTDOWN_DELAY_MS: String(DELAY_MS),
      COFFER_SHUTDOWN_GRACE_MS: String(GRACE_MS),
    })
    apiKey = bootstrapCredentials(dir).api_key
  }, 60_000)
  afterAll(async () => {
    await server?.stop()
    pki?.close()
    await db?.drop()
  })

  it('drains HTTP/2 with GOAWAY (no Connection header), HTTP/1 with Connection: close; exits 0 without waiting for idle sessions', async () => {
    const auth = { authorization: basic(apiKey) }
    const busy = await h2Connect(pki, server.url)
    const idle = await h2Connect(pki, server.url)
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: pki.ca.cert })
    const goaways = { busy: false, idle: false }
    busy.on('goaway', () => {
      goaways.busy = true
    })
    idle.on('goaway', () => {
      goaways.idle = true
    })
    idle.on('error', () => {})
    busy.on('error', () => {})
    try {
      expect((await h2Request(busy, '/v1/auth/me', { headers: auth })).status).toBe(200)
      expect((await h2Request(idle, '/healthz')).status).toBe(200)
      // A body the parser refuses: Fastify asks to close the connection, on HTTP/2 too.
      const malformed = await h2Request(busy, '/v1/vaults', {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: '{"name":',
      })
      expect(malformed.status).toBe(400)
      expect(malformed.headers.connection).toBeUndefined()
      const before = await httpsRequest(pki, `${server.url}/v1/auth/me`, { agent, headers: auth })
      expect(before.headers.connection).toBe('keep-alive')

      const exited = new Promise<number | null>((r) => server.child.once('exit', (c) => r(c)))
      const signalled = Date.now()
      server.child.kill('SIGTERM')
      await waitForOutput(server, /shutting down/)
      // During the drain delay: answered, and told to go elsewhere, each in its protocol's way.
      const onH2 = await h2Request(busy, '/v1/auth/me', { headers: auth })
      expect(onH2.status).toBe(200)
      expect(json(onH2).user).toBeDefined()
      expect(onH2.headers.connection).toBeUndefined()
      await new Promise((r) => setTimeout(r, 100))
      expect(goaways.busy).toBe(true)
      const onH1 = await httpsRequest(pki, `${server.url}/v1/auth/me`, { agent, headers: auth })
      expect(onH1.status).toBe(200)
      expect(onH1.headers.connection).toBe('close')
      // The warning Node prints when a Connection header is set on HTTP/2 never appears.
      expect(server.output()).not.toMatch(/UnsupportedWarning|connection header is not valid/)

      // The idle session is closed when the listeners close (GOAWAY), not left to the grace
      // period's cut: the process exits 0 soon after the delay.
      expect(await exited).toBe(0)
      expect(goaways.idle).toBe(true)
      const took = Date.now() - signalled
      expect(took).toBeGreaterThanOrEqual(DELAY_MS)
      expect(took).toBeLessThan(DELAY_MS + 8000)
      expect(server.output()).not.toMatch(/still running after the grace period/)
    } finally {
      busy.destroy()
      idle.destroy()
      agent.destroy()
    }
  }, 60_000)
})

describe(`coffer serve over TLS: SIGHUP during the shutdown (${testDialect})`, () => {
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

  it('a renewal hook’s SIGHUP while draining neither reloads nor kills: the drain ends, exit 0', async () => {
    const DELAY_MS = 1500
    const server = await startServerProcess({
      ...db.env(db.dataDir()),
      COFFER_TLS_CERT_FILE: pki.leaf.certFile,
      COFFER_TLS_KEY_FILE: pki.leaf.keyFile,
      COFFER_SHUTDOWN_DELAY_MS: String(DELAY_MS),
    })
    try {
      const exited = new Promise<[number | null, string | null]>((r) =>
        server.child.once('exit', (code, signal) => r([code, signal])),
      )
      server.child.kill('SIGTERM')
      await waitForOutput(server, /shutting down/)
      server.child.kill('SIGHUP')
      // Still serving the drain after the signal.
      await new Promise((r) => setTimeout(r, 200))
      expect((await httpsRequest(pki, `${server.url}/healthz`)).status).toBe(200)
      expect(await exited).toEqual([0, null])
      expect(server.output()).toMatch(/SIGHUP ignored: shutting down/)
    } finally {
      await server.stop()
    }
  }, 60_000)
})
