import {
  constants,
  createHash,
  createPrivateKey,
  type KeyObject,
  X509Certificate,
} from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { createSecureContext, type SecureContextOptions } from 'node:tls'
import type { ClientAuthMode, TlsPairFiles } from '../config-tls.js'

/**
 * A listener's TLS material, read from its PEM files and proven to load (issue 19): at start,
 * before anything is written, and again on every reload (http/tls-reload.ts), which keeps the
 * pair in service when the new one fails here.
 */

/** TLS 1.0 and 1.1 are deprecated (RFC 8996); 1.2 is what every supported client speaks. */
export const TLS_MIN_VERSION = 'TLSv1.2'

export interface ClientAuthFiles {
  caFile: string
  mode: ClientAuthMode
}

/** What may be logged about a certificate: never the key, never the PEM. */
export interface CertificateSummary {
  subject: string
  fingerprint256: string
  validFrom: string
  validTo: string
  expired: boolean
}

export interface TlsMaterial {
  cert: Buffer
  key: Buffer
  /** The CA that issues client certificates, when they are asked for. */
  clientCa?: Buffer
  clientAuth?: ClientAuthMode
  /** SHA-256 of everything above: a reload swaps nothing when it is unchanged (never logged). */
  digest: string
  leaf: CertificateSummary
}

/** A file or pair that does not load; the message names the setting and the path, no content. */
export class TlsMaterialError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'TlsMaterialError'
  }
}

async function readPem(setting: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    const reason =
      code === 'ENOENT'
        ? 'there is no such file'
        : code === 'EISDIR'
          ? 'it is a folder, not a file'
          : code === 'EACCES' || code === 'EPERM'
            ? 'this process may not read it'
            : 'it cannot be read'
    throw new TlsMaterialError(`${setting} (${file}): ${reason} (${code})`)
  }
}

function certificate(setting: string, file: string, pem: Buffer): X509Certificate {
  try {
    return new X509Certificate(pem)
  } catch {
    throw new TlsMaterialError(`${setting} (${file}) holds no PEM certificate`)
  }
}

function privateKey(setting: string, file: string, pem: Buffer): KeyObject {
  try {
    return createPrivateKey(pem)
  } catch {
    // PKCS#8 (`ENCRYPTED PRIVATE KEY`) or traditional (`Proc-Type: 4,ENCRYPTED`): no prompt.
    const encrypted = /ENCRYPTED/.test(pem.toString('latin1'))
    throw new TlsMaterialError(
      encrypted
        ? `${setting} (${file}) holds an encrypted private key: give it unencrypted (mode 0600)`
        : `${setting} (${file}) holds no PEM private key`,
    )
  }
}

export function summarize(cert: X509Certificate, now = Date.now()): CertificateSummary {
  return {
    subject: cert.subject.replace(/\n/g, ', '),
    fingerprint256: cert.fingerprint256,
    validFrom: new Date(cert.validFrom).toISOString(),
    validTo: new Date(cert.validTo).toISOString(),
    expired: Date.parse(cert.validTo) < now,
  }
}

/**
 * The secure context of a listener: its pair, TLS 1.2 at least, Node's default ciphers, and no
 * TLS 1.2 renegotiation: a client may otherwise ask for a fresh handshake (the server's CPU)
 * on an open connection (Node allows 3 per 10 minutes); HTTP/2 forbids it (RFC 9113 §9.2.1),
 * no client of Coffer needs it, and TLS 1.3 has none.
 */
export function secureContextOptions(material: TlsMaterial): SecureContextOptions {
  return {
    cert: material.cert,
    key: material.key,
    minVersion: TLS_MIN_VERSION,
    secureOptions: constants.SSL_OP_NO_RENEGOTIATION,
    ...(material.clientCa ? { ca: material.clientCa } : {}),
  }
}

/**
 * Reads the pair (and the client CA) and proves it loads: each file parses, the key matches the
 * first certificate of the chain, and OpenSSL builds a secure context from them. An expired
 * certificate still loads (summary.expired says so: the caller warns).
 */
export async function loadTlsMaterial(
  files: TlsPairFiles,
  clientAuth?: ClientAuthFiles,
): Promise<TlsMaterial> {
  const [cert, key, clientCa] = await Promise.all([
    readPem(files.certSetting, files.certFile),
    readPem(files.keySetting, files.keyFile),
    clientAuth ? readPem('COFFER_TLS_CLIENT_CA_FILE', clientAuth.caFile) : undefined,
  ])
  const leaf = certificate(files.certSetting, files.certFile, cert)
  const keyObject = privateKey(files.keySetting, files.keyFile, key)
  if (!leaf.checkPrivateKey(keyObject)) {
    throw new TlsMaterialError(
      `the key in ${files.keySetting} (${files.keyFile}) does not match the certificate in ${files.certSetting} (${files.certFile})`,
    )
  }
  if (clientAuth && clientCa) certificate('COFFER_TLS_CLIENT_CA_FILE', clientAuth.caFile, clientCa)
  const digest = createHash('sha256')
  for (const part of [cert, key, clientCa ?? Buffer.alloc(0)]) {
    digest.update(String(part.length)).update(':').update(part)
  }
  const material: TlsMaterial = {
    cert,
    key,
    ...(clientCa && clientAuth ? { clientCa, clientAuth: clientAuth.mode } : {}),
    digest: digest.digest('hex'),
    leaf: summarize(leaf),
  }
  try {
    createSecureContext(secureContextOptions(material))
  } catch (error) {
    // OpenSSL's reason (a code and a phrase: never key material).
    throw new TlsMaterialError(
      `${files.certSetting}/${files.keySetting}: the pair does not load (${(error as Error).message})`,
    )
  }
  return material
}
