import { execFileSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeTestPki, type TestPki } from '../../test/helpers/tls-pki.js'
import type { TlsPairFiles } from '../config-tls.js'
import {
  loadTlsMaterial,
  secureContextOptions,
  summarize,
  TLS_MIN_VERSION,
  TlsMaterialError,
} from './tls-material.js'

const isRoot = process.getuid?.() === 0

let pki: TestPki
beforeAll(() => {
  pki = makeTestPki()
})
afterAll(() => pki?.close())

const pair = (certFile: string, keyFile: string): TlsPairFiles => ({
  certFile,
  keyFile,
  certSetting: 'COFFER_TLS_CERT_FILE',
  keySetting: 'COFFER_TLS_KEY_FILE',
})

async function failure(files: TlsPairFiles, caFile?: string): Promise<string> {
  try {
    await loadTlsMaterial(files, caFile ? { caFile, mode: 'require' } : undefined)
  } catch (e) {
    expect(e).toBeInstanceOf(TlsMaterialError)
    return (e as Error).message
  }
  throw new Error('expected the pair to be refused')
}

describe('loadTlsMaterial: a pair proven to load (issue 19)', () => {
  it('loads a pair and its client CA; the summary names the certificate, never the key', async () => {
    const m = await loadTlsMaterial(pair(pki.leaf.certFile, pki.leaf.keyFile), {
      caFile: pki.ca.certFile,
      mode: 'optional',
    })
    expect(m.clientAuth).toBe('optional')
    expect(m.clientCa?.toString()).toBe(pki.ca.cert)
    expect(m.leaf).toMatchObject({
      subject: 'CN=server-one',
      fingerprint256: new X509Certificate(pki.leaf.cert).fingerprint256,
      expired: false,
    })
    expect(JSON.stringify(m.leaf)).not.toMatch(/KEY|BEGIN/)
    expect(secureContextOptions(m)).toMatchObject({ minVersion: 'TLSv1.2', ca: m.clientCa })
    expect(TLS_MIN_VERSION).toBe('TLSv1.2')
  })

  it('the digest tells a changed pair from the same one', async () => {
    const a = await loadTlsMaterial(pair(pki.leaf.certFile, pki.leaf.keyFile))
    const again = await loadTlsMaterial(pair(pki.leaf.certFile, pki.leaf.keyFile))
    const b = await loadTlsMaterial(pair(pki.leaf2.certFile, pki.leaf2.keyFile))
    expect(again.digest).toBe(a.digest)
    expect(b.digest).not.toBe(a.digest)
    const withCa = await loadTlsMaterial(pair(pki.leaf.certFile, pki.leaf.keyFile), {
      caFile: pki.ca.certFile,
      mode: 'require',
    })
    expect(withCa.digest).not.toBe(a.digest)
  })

  it('a path with no file, or a folder, names the setting and the path', async () => {
    const missing = join(pki.dir, 'missing.pem')
    expect(await failure(pair(missing, pki.leaf.keyFile))).toBe(
      `COFFER_TLS_CERT_FILE (${missing}): there is no such file (ENOENT)`,
    )
    expect(await failure(pair(pki.leaf.certFile, pki.dir))).toBe(
      `COFFER_TLS_KEY_FILE (${pki.dir}): it is a folder, not a file (EISDIR)`,
    )
    expect(await failure(pair(pki.leaf.certFile, pki.leaf.keyFile), missing)).toBe(
      `COFFER_TLS_CLIENT_CA_FILE (${missing}): there is no such file (ENOENT)`,
    )
  })

  it('a file this process may not read', async () => {
    const dir = mkdtempSync(join(pki.dir, 'locked-'))
    const key = join(dir, 'key.pem')
    copyFileSync(pki.leaf.keyFile, key)
    chmodSync(key, 0o000)
    const expected = `COFFER_TLS_KEY_FILE (${key}): this process may not read it (EACCES)`
    if (!isRoot) {
      expect(await failure(pair(pki.leaf.certFile, key))).toBe(expected)
      return
    }
    // Root reads any file: the same load, in a process of an unprivileged user (the folders on
    // the way must let it through, as they would for a service account).
    chmodSync(pki.dir, 0o755)
    chmodSync(dir, 0o755)
    chmodSync(pki.leaf.certFile, 0o644)
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
    const module = fileURLToPath(new URL('./tls-material.ts', import.meta.url))
    const script = `import(${JSON.stringify(module)}).then((m) => m.loadTlsMaterial(${JSON.stringify(
      pair(pki.leaf.certFile, key),
    )})).then(() => console.log('loaded'), (e) => console.log(e.message))`
    const out = execFileSync(process.execPath, ['--import', tsx, '-e', script], {
      uid: 65534,
      gid: 65534,
      cwd: '/',
      encoding: 'utf8',
    })
    expect(out.trim()).toBe(expected)
  })

  it('files that are not PEM, an encrypted key', async () => {
    const dir = mkdtempSync(join(pki.dir, 'bad-'))
    const text = join(dir, 'text.pem')
    writeFileSync(text, 'just text\n')
    const empty = join(dir, 'empty.pem')
    writeFileSync(empty, '')
    const encrypted = join(dir, 'encrypted.key')
    execFileSync('openssl', [
      'pkey',
      '-in',
      pki.leaf.keyFile,
      '-aes256',
      '-passout',
      'pass:secret',
      '-out',
      encrypted,
    ])
    expect(await failure(pair(text, pki.leaf.keyFile))).toBe(
      `COFFER_TLS_CERT_FILE (${text}) holds no PEM certificate`,
    )
    expect(await failure(pair(empty, pki.leaf.keyFile))).toBe(
      `COFFER_TLS_CERT_FILE (${empty}) holds no PEM certificate`,
    )
    // A key in the certificate's place, and the other way round.
    expect(await failure(pair(pki.leaf.keyFile, pki.leaf.keyFile))).toMatch(
      /holds no PEM certificate/,
    )
    expect(await failure(pair(pki.leaf.certFile, pki.leaf.certFile))).toBe(
      `COFFER_TLS_KEY_FILE (${pki.leaf.certFile}) holds no PEM private key`,
    )
    expect(await failure(pair(pki.leaf.certFile, encrypted))).toBe(
      `COFFER_TLS_KEY_FILE (${encrypted}) holds an encrypted private key: give it unencrypted (mode 0600)`,
    )
    expect(await failure(pair(pki.leaf.certFile, pki.leaf.keyFile), text)).toBe(
      `COFFER_TLS_CLIENT_CA_FILE (${text}) holds no PEM certificate`,
    )
  })

  it('a key that does not match the certificate', async () => {
    expect(await failure(pair(pki.leaf.certFile, pki.leaf2.keyFile))).toBe(
      `the key in COFFER_TLS_KEY_FILE (${pki.leaf2.keyFile}) does not match the certificate in COFFER_TLS_CERT_FILE (${pki.leaf.certFile})`,
    )
  })

  it('a chain (leaf, then the CA) loads; its first certificate is the one summarized', async () => {
    const dir = mkdtempSync(join(pki.dir, 'chain-'))
    mkdirSync(join(dir, 'x'))
    const chain = join(dir, 'x', 'fullchain.pem')
    writeFileSync(chain, pki.leaf.cert + pki.ca.cert)
    const m = await loadTlsMaterial(pair(chain, pki.leaf.keyFile))
    expect(m.leaf.subject).toBe('CN=server-one')
  })

  it('summarize says when a certificate has expired', () => {
    const cert = new X509Certificate(pki.leaf.cert)
    expect(summarize(cert).expired).toBe(false)
    expect(summarize(cert, Date.parse(cert.validTo) + 1000).expired).toBe(true)
  })
})
