import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A certificate and its key, as PEM files on disk and as text. */
export interface Issued {
  certFile: string
  keyFile: string
  cert: string
  key: string
}

export interface TestPki {
  dir: string
  /** The test CA (PEM): what clients trust, and what signs the client certificates. */
  ca: Issued
  /** Server certificates for 127.0.0.1 and localhost, signed by the CA. */
  leaf: Issued
  /** A second one (rotation), same names, another key. */
  leaf2: Issued
  /** A third (the consent listener's own pair). */
  consentLeaf: Issued
  /** A client certificate signed by the CA. */
  client: Issued
  /** Another CA nobody trusts, and a client certificate it signed. */
  foreignCa: Issued
  foreignClient: Issued
  /** A server certificate signed by the foreign CA (a client trusting only `ca` refuses it). */
  foreignLeaf: Issued
  close(): void
}

const openssl = (args: string[], cwd: string) =>
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })

/** A fresh P-256 key (fast to make; every TLS stack takes it). */
function newKey(dir: string, name: string): string {
  const file = join(dir, `${name}.key`)
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file], dir)
  return file
}

function issued(certFile: string, keyFile: string): Issued {
  return {
    certFile,
    keyFile,
    cert: readFileSync(certFile, 'utf8'),
    key: readFileSync(keyFile, 'utf8'),
  }
}

function selfSignedCa(dir: string, name: string): Issued {
  const keyFile = newKey(dir, name)
  const certFile = join(dir, `${name}.pem`)
  const ext = join(dir, `${name}.ext`)
  writeFileSync(
    ext,
    '[v3]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n',
  )
  const csr = join(dir, `${name}.csr`)
  openssl(['req', '-new', '-key', keyFile, '-subj', `/CN=${name}`, '-out', csr], dir)
  openssl(
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-signkey',
      keyFile,
      '-days',
      '2',
      '-extfile',
      ext,
      '-extensions',
      'v3',
      '-out',
      certFile,
    ],
    dir,
  )
  return issued(certFile, keyFile)
}

/** A certificate for `name` signed by `ca`: a server one (SAN 127.0.0.1, localhost) or a client one. */
function signedBy(ca: Issued, dir: string, name: string, usage: 'server' | 'client'): Issued {
  const keyFile = newKey(dir, name)
  const certFile = join(dir, `${name}.pem`)
  const ext = join(dir, `${name}.ext`)
  const lines = ['[v3]', 'basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature']
  if (usage === 'server') {
    lines.push('extendedKeyUsage=serverAuth', 'subjectAltName=IP:127.0.0.1,DNS:localhost')
  } else lines.push('extendedKeyUsage=clientAuth')
  writeFileSync(ext, `${lines.join('\n')}\n`)
  const csr = join(dir, `${name}.csr`)
  openssl(['req', '-new', '-key', keyFile, '-subj', `/CN=${name}`, '-out', csr], dir)
  openssl(
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.certFile,
      '-CAkey',
      ca.keyFile,
      '-set_serial',
      `0x${randomBytes(8).toString('hex')}`,
      '-days',
      '2',
      '-extfile',
      ext,
      '-extensions',
      'v3',
      '-out',
      certFile,
    ],
    dir,
  )
  return issued(certFile, keyFile)
}

/**
 * A test CA and the certificates the TLS tests need, made with the `openssl` CLI in a fresh
 * temporary folder (valid two days; removed by close()).
 */
export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-pki-'))
  const ca = selfSignedCa(dir, 'coffer-test-ca')
  const foreignCa = selfSignedCa(dir, 'foreign-ca')
  return {
    dir,
    ca,
    leaf: signedBy(ca, dir, 'server-one', 'server'),
    leaf2: signedBy(ca, dir, 'server-two', 'server'),
    consentLeaf: signedBy(ca, dir, 'consent-server', 'server'),
    client: signedBy(ca, dir, 'good-client', 'client'),
    foreignCa,
    foreignClient: signedBy(foreignCa, dir, 'foreign-client', 'client'),
    foreignLeaf: signedBy(foreignCa, dir, 'foreign-server', 'server'),
    close: () => rmSync(dir, { recursive: true, force: true }),
  }
}
