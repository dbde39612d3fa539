import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { SecureContextOptions } from 'node:tls'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { TlsPairFiles } from '../../src/config-tls.js'
import { loadTlsMaterial } from '../../src/http/tls-material.js'
import {
  CertificateReloader,
  RELOAD_DEBOUNCE_MS,
  type ReloadLog,
} from '../../src/http/tls-reload.js'
import { buildTestApp } from '../helpers/app.js'
import { localhostResolvingTo } from '../helpers/hosts.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import {
  basic,
  eventually,
  fingerprintOf,
  h2Connect,
  h2Request,
  handshake,
  httpsRequest,
  renegotiation,
  servedFingerprint,
} from '../helpers/tls-clients.js'
import { type Issued, makeTestPki, type TestPki } from '../helpers/tls-pki.js'

/**
 * Issue 19: certificate rotation without a restart, in this process over real sockets. The
 * reloader is the one `coffer serve` runs (SIGHUP in a real process: tls-processes.test.ts).
 */

let pki: TestPki
let dir: string
beforeAll(() => {
  pki = makeTestPki()
})
afterAll(() => pki?.close())

interface Logged {
  level: 'info' | 'warn' | 'error'
  obj: Record<string, unknown>
  msg: string
}

function recordingLog(): ReloadLog & { lines: Logged[]; text(): string } {
  const lines: Logged[] = []
  const at = (level: Logged['level']) => (obj: object, msg: string) => {
    lines.push({ level, obj: obj as Record<string, unknown>, msg })
  }
  return {
    lines,
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    text: () => JSON.stringify(lines),
  }
}

const reloads = (log: { lines: Logged[] }) =>
  log.lines.filter((l) => l.msg === 'TLS certificate reloaded')
const refusals = (log: { lines: Logged[] }) => log.lines.filter((l) => l.level === 'error')

/** Writes `pem` to `file` as editors do: a temporary file renamed over it. */
function replace(file: string, pem: string): void {
  writeFileSync(`${file}.tmp`, pem)
  renameSync(`${file}.tmp`, file)
}

function pairIn(folder: string): TlsPairFiles {
  return {
    certFile: join(folder, 'cert.pem'),
    keyFile: join(folder, 'key.pem'),
    certSetting: 'COFFER_TLS_CERT_FILE',
    keySetting: 'COFFER_TLS_KEY_FILE',
  }
}

function install(files: TlsPairFiles, issued: Issued): void {
  copyFileSync(issued.certFile, files.certFile)
  copyFileSync(issued.keyFile, files.keyFile)
}

let server: TestServer | undefined
let reloader: CertificateReloader | undefined
afterEach(async () => {
  reloader?.stop()
  reloader = undefined
  await server?.close()
  server = undefined
  if (dir) rmSync(dir, { recursive: true, force: true })
})

async function serve(
  files: TlsPairFiles,
  options: { watch?: boolean; clientAuth?: boolean; caFile?: string } = {},
) {
  const clientAuth = options.clientAuth
    ? { caFile: options.caFile ?? pki.ca.certFile, mode: 'require' as const }
    : undefined
  const material = await loadTlsMaterial(files, clientAuth)
  server = await startTestServer({ tls: material })
  const log = recordingLog()
  reloader = new CertificateReloader(
    [
      {
        listener: 'api',
        files,
        ...(clientAuth ? { clientAuth } : {}),
        server: server.testApp.app.server as unknown as {
          setSecureContext(o: SecureContextOptions): void
        },
        material,
      },
    ],
    log,
  )
  if (options.watch !== false) reloader.watchFiles()
  const port = (server.testApp.app.server.address() as AddressInfo).port
  return { server, port, log, reloader }
}

describe('certificate rotation without a restart', () => {
  it('a pair replaced on disk is served to the next connection; open ones keep working', async () => {
    dir = mkdtempSync(join(pki.dir, 'live-'))
    const files = pairIn(dir)
    install(files, pki.leaf)
    const { server, port, log } = await serve(files)
    const auth = { authorization: basic(server.admin.api_key) }
    // Before: a keep-alive HTTP/1.1 connection and an HTTP/2 session, both on the first pair.
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: pki.ca.cert })
    const session = await h2Connect(pki, server.url)
    try {
      const before = await httpsRequest(pki, `${server.url}/v1/auth/me`, { agent, headers: auth })
      expect(before.status).toBe(200)
      const socket = before.socket
      expect(socket?.getPeerX509Certificate()?.fingerprint256).toBe(fingerprintOf(pki.leaf.cert))
      expect((await h2Request(session, '/v1/auth/me', { headers: auth })).status).toBe(200)

      // The swap: the certificate, then its key, each renamed into place (as an editor does).
      replace(files.certFile, pki.leaf2.cert)
      replace(files.keyFile, pki.leaf2.key)
      await eventually(
        async () => (await servedFingerprint(pki, port)) === fingerprintOf(pki.leaf2.cert),
      )

      // The connections opened before go on, on the certificate they were given.
      const after = await httpsRequest(pki, `${server.url}/v1/auth/me`, { agent, headers: auth })
      expect(after.status).toBe(200)
      // The same TLS connection (its certificate cannot change under it).
      expect(after.socket).toBe(socket)
      expect(socket?.destroyed).toBe(false)
      const onSession = await h2Request(session, '/v1/auth/me', { headers: auth })
      expect(onSession.status).toBe(200)
      const sessionSocket = session.socket as unknown as {
        getPeerX509Certificate(): { fingerprint256: string }
      }
      expect(sessionSocket.getPeerX509Certificate().fingerprint256).toBe(
        fingerprintOf(pki.leaf.cert),
      )
      // New connections, both protocols, get the new one, still by ALPN.
      const fresh = await handshake(port, { ca: pki.ca.cert, ALPNProtocols: ['h2', 'http/1.1'] })
      expect(fresh).toMatchObject({ ok: true, alpn: 'h2' })
      // Two renames within the debounce: one reload, logged without key material.
      expect(reloads(log)).toHaveLength(1)
      expect(reloads(log)[0]?.obj).toMatchObject({
        listener: 'api',
        reason: 'file change',
        subject: 'CN=server-two',
        fingerprint256: fingerprintOf(pki.leaf2.cert),
      })
      expect(log.text()).not.toMatch(/PRIVATE KEY|BEGIN/)
      expect(log.text()).not.toContain(pki.leaf2.key.split('\n')[1])
    } finally {
      session.close()
      agent.destroy()
    }
  })

  it('follows a symlink swap (certbot’s live/ folder)', async () => {
    dir = mkdtempSync(join(pki.dir, 'certbot-'))
    const archive = join(dir, 'archive')
    const live = join(dir, 'live')
    mkdirSync(archive)
    mkdirSync(live)
    for (const [n, issued] of [
      [1, pki.leaf],
      [2, pki.leaf2],
    ] as const) {
      copyFileSync(issued.certFile, join(archive, `fullchain${n}.pem`))
      copyFileSync(issued.keyFile, join(archive, `privkey${n}.pem`))
    }
    const files = {
      ...pairIn(live),
      certFile: join(live, 'fullchain.pem'),
      keyFile: join(live, 'privkey.pem'),
    }
    symlinkSync('../archive/fullchain1.pem', files.certFile)
    symlinkSync('../archive/privkey1.pem', files.keyFile)
    const { port, log } = await serve(files)
    expect(await servedFingerprint(pki, port)).toBe(fingerprintOf(pki.leaf.cert))
    // certbot renew: new links made beside the old ones, renamed over them.
    for (const [link, target] of [
      [files.certFile, '../archive/fullchain2.pem'],
      [files.keyFile, '../archive/privkey2.pem'],
    ] as const) {
      symlinkSync(target, `${link}.new`)
      renameSync(`${link}.new`, link)
    }
    await eventually(
      async () => (await servedFingerprint(pki, port)) === fingerprintOf(pki.leaf2.cert),
    )
    expect(reloads(log)).toHaveLength(1)
  })

  it('a pair that does not load is refused with a log line; the one in service stays', async () => {
    dir = mkdtempSync(join(pki.dir, 'broken-'))
    const files = pairIn(dir)
    install(files, pki.leaf)
    const { port, log, reloader } = await serve(files, { watch: false })
    const served = () => servedFingerprint(pki, port)
    const cases: [string, () => void, RegExp][] = [
      [
        'a key that does not match',
        () => copyFileSync(pki.leaf2.certFile, files.certFile),
        /the key in COFFER_TLS_KEY_FILE \(.*key\.pem\) does not match the certificate in COFFER_TLS_CERT_FILE/,
      ],
      [
        'a certificate file that is not PEM',
        () => writeFileSync(files.certFile, 'not a certificate\n'),
        /COFFER_TLS_CERT_FILE \(.*cert\.pem\) holds no PEM certificate/,
      ],
      [
        'a key file that is not PEM',
        () => {
          copyFileSync(pki.leaf2.certFile, files.certFile)
          writeFileSync(
            files.keyFile,
            '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n',
          )
        },
        /COFFER_TLS_KEY_FILE \(.*key\.pem\) holds no PEM private key/,
      ],
      [
        'a missing key file',
        () => rmSync(files.keyFile),
        /COFFER_TLS_KEY_FILE \(.*key\.pem\): there is no such file \(ENOENT\)/,
      ],
    ]
    for (const [name, breakIt, message] of cases) {
      breakIt()
      expect(await reloader.reload('SIGHUP'), name).toEqual(['refused'])
      expect(await served(), name).toBe(fingerprintOf(pki.leaf.cert))
      const line = refusals(log).at(-1)
      expect(line?.msg, name).toBe(
        'TLS certificate not reloaded: the new files do not load; the certificate in service stays',
      )
      expect(String(line?.obj.error), name).toMatch(message)
      expect(line?.obj, name).toMatchObject({ listener: 'api', reason: 'SIGHUP' })
    }
    expect(log.text()).not.toMatch(/PRIVATE KEY|AAAA/)
    expect(reloads(log)).toHaveLength(0)
    // Put right: the next reload takes it.
    install(files, pki.leaf2)
    expect(await reloader.reload('SIGHUP')).toEqual(['reloaded'])
    expect(await served()).toBe(fingerprintOf(pki.leaf2.cert))
    // Unchanged files: nothing swapped, said so for an operator's signal.
    expect(await reloader.reload('SIGHUP')).toEqual(['unchanged'])
    expect(log.lines.at(-1)?.msg).toBe('TLS certificate unchanged')
  })

  it('a broken pair written on disk is refused the same way; the watcher takes the fixed one', async () => {
    dir = mkdtempSync(join(pki.dir, 'watched-broken-'))
    const files = pairIn(dir)
    install(files, pki.leaf)
    const { port, log } = await serve(files)
    replace(files.certFile, pki.leaf2.cert)
    await eventually(async () => refusals(log).length > 0)
    expect(refusals(log)[0]?.obj).toMatchObject({ reason: 'file change' })
    expect(await servedFingerprint(pki, port)).toBe(fingerprintOf(pki.leaf.cert))
    replace(files.keyFile, pki.leaf2.key)
    await eventually(
      async () => (await servedFingerprint(pki, port)) === fingerprintOf(pki.leaf2.cert),
    )
  })

  it('a reload keeps TLS 1.2 as the floor, no renegotiation and client certificates required', async () => {
    dir = mkdtempSync(join(pki.dir, 'policy-'))
    const files = pairIn(dir)
    install(files, pki.leaf)
    const { port, reloader } = await serve(files, { watch: false, clientAuth: true })
    install(files, pki.leaf2)
    expect(await reloader.reload('SIGHUP')).toEqual(['reloaded'])
    const client = { ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key }
    const good = await handshake(port, client)
    expect(good.ok && good.certificate.fingerprint256).toBe(fingerprintOf(pki.leaf2.cert))
    const old = await handshake(port, {
      ...client,
      minVersion: 'TLSv1',
      maxVersion: 'TLSv1.1',
      ciphers: 'DEFAULT@SECLEVEL=0',
    })
    expect(old).toMatchObject({ ok: false, code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' })
    // Without a client certificate: refused during the TLS 1.2 handshake.
    const none = await handshake(port, { ca: pki.ca.cert, maxVersion: 'TLSv1.2' })
    expect(none.ok).toBe(false)
    // Still no renegotiation.
    expect(await renegotiation(pki, port, { cert: pki.client.cert, key: pki.client.key })).toBe(
      'ERR_SSL_NO_RENEGOTIATION',
    )
  })

  it('the client CA is reloaded with the pair: a new CA alone is taken, a broken one refused', async () => {
    dir = mkdtempSync(join(pki.dir, 'client-ca-'))
    const files = pairIn(dir)
    install(files, pki.leaf)
    const caFile = join(dir, 'clients.pem')
    copyFileSync(pki.ca.certFile, caFile)
    const { port, reloader } = await serve(files, { watch: false, clientAuth: true, caFile })
    const as = (client: Issued) =>
      handshake(port, {
        ca: pki.ca.cert,
        cert: client.cert,
        key: client.key,
        maxVersion: 'TLSv1.2',
      })
    expect((await as(pki.client)).ok).toBe(true)
    expect((await as(pki.foreignClient)).ok).toBe(false)
    // Only the CA file changes (the services' certificates now come from another CA).
    copyFileSync(pki.foreignCa.certFile, caFile)
    expect(await reloader.reload('SIGHUP')).toEqual(['reloaded'])
    expect((await as(pki.foreignClient)).ok).toBe(true)
    expect((await as(pki.client)).ok).toBe(false)
    // A CA file that is not PEM: refused, the CA in service stays.
    writeFileSync(caFile, 'not a certificate\n')
    expect(await reloader.reload('SIGHUP')).toEqual(['refused'])
    expect((await as(pki.foreignClient)).ok).toBe(true)
  })

  it('a listener on a host name serves the reloaded pair on every address it listens on', async () => {
    // COFFER_HOST=localhost where the hosts file lists 127.0.0.1 and ::1 (Debian, Docker).
    const undo = localhostResolvingTo(['127.0.0.1', '::1'])
    dir = mkdtempSync(join(pki.dir, 'localhost-'))
    const files = pairIn(dir)
    install(files, pki.leaf)
    const material = await loadTlsMaterial(files)
    const testApp = await buildTestApp({ tls: material })
    try {
      await testApp.app.listen({ host: 'localhost', port: 0 })
      const log = recordingLog()
      const hangupReloader = new CertificateReloader(
        [
          {
            listener: 'api',
            files,
            server: testApp.app.server as unknown as {
              setSecureContext(o: SecureContextOptions): void
            },
            material,
          },
        ],
        log,
      )
      install(files, pki.leaf2)
      expect(await hangupReloader.reload('SIGHUP')).toEqual(['reloaded'])
      const addresses = testApp.app.addresses() as AddressInfo[]
      expect(addresses.length).toBeGreaterThan(0)
      for (const { address, port } of addresses) {
        const served = await handshake(port, { host: address, ca: pki.ca.cert })
        expect(served.ok && served.certificate.fingerprint256, address).toBe(
          fingerprintOf(pki.leaf2.cert),
        )
      }
    } finally {
      undo()
      await testApp.close()
    }
  })

  it('stop() ends the watching and the SIGHUP listener', async () => {
    dir = mkdtempSync(join(pki.dir, 'stopped-'))
    const files = pairIn(dir)
    install(files, pki.leaf)
    const hangups = process.listenerCount('SIGHUP')
    const { port, log, reloader } = await serve(files)
    reloader.listenForHangup()
    expect(process.listenerCount('SIGHUP')).toBe(hangups + 1)
    reloader.stop()
    expect(process.listenerCount('SIGHUP')).toBe(hangups)
    install(files, pki.leaf2)
    await new Promise((r) => setTimeout(r, RELOAD_DEBOUNCE_MS * 3))
    expect(log.lines).toHaveLength(0)
    expect(await servedFingerprint(pki, port)).toBe(fingerprintOf(pki.leaf.cert))
  })
})
