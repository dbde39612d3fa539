import { readFileSync } from 'node:fs'
import type { ConnectionOptions } from 'node:tls'

/**
 * TLS to PostgreSQL, asked for in COFFER_DATABASE_URL the way libpq asks for it (issue 22):
 * `sslmode` and `sslrootcert`, with libpq's meaning (decisions.md 230):
 * - `disable` (and no `sslmode`): no TLS.
 * - `require`: TLS, the server's certificate not checked — unless `sslrootcert` is given, then
 *   as `verify-ca` (libpq does the same).
 * - `verify-ca`: TLS, the certificate must chain to `sslrootcert` (or, without it, to Node's CA
 *   store); the host name is not checked.
 * - `verify-full`: as `verify-ca`, and the certificate must name the host connected to.
 * `allow` and `prefer` are refused: Coffer never falls back to a connection in clear, so a URL
 * that would let it must say `disable` or `require` instead. `sslrootcert=system` is Node's CA
 * store. Client certificates (`sslcert`, `sslkey`) are not supported and refused. node-postgres'
 * own `ssl=true` keeps the meaning it had before (`verify-full` on Node's CA store).
 *
 * The parameters are taken out of the URL handed to node-postgres and given as its `ssl` option
 * (node-postgres lets the URL's own TLS parameters override the option, with other meanings:
 * it treats `require` as `verify-full`). PGSSLMODE and the other PG* TLS variables are not read.
 */
export const PG_SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const
export type PgSslMode = (typeof PG_SSL_MODES)[number]

export interface PgTlsSettings {
  mode: PgSslMode
  /** A PEM file of trusted CAs; undefined: Node's CA store. */
  rootCert: string | undefined
}

/** URL parameters about TLS: read here, removed from what node-postgres sees. */
const TLS_PARAMS = [
  'sslmode',
  'sslrootcert',
  'sslcert',
  'sslkey',
  'sslpassword',
  'ssl',
  'uselibpqcompat',
  'sslnegotiation',
]

/**
 * The TLS settings of a `postgres://` URL; what is wrong goes into `problems` (config errors,
 * naming the setting, never the URL: it may hold a password).
 */
export function pgTlsSettings(url: string, problems: string[] = []): PgTlsSettings {
  let params: URLSearchParams
  try {
    params = new URL(url).searchParams
  } catch {
    problems.push('COFFER_DATABASE_URL is not a valid postgres:// URL')
    return { mode: 'disable', rootCert: undefined }
  }
  const given = params.get('sslmode')
  const legacy = params.get('ssl')
  let mode: PgSslMode = 'disable'
  if (given !== null) {
    if ((PG_SSL_MODES as readonly string[]).includes(given)) mode = given as PgSslMode
    else if (given === 'allow' || given === 'prefer')
      problems.push(
        `COFFER_DATABASE_URL: sslmode=${given} may fall back to a connection in clear, which Coffer does not do: use sslmode=require, verify-ca or verify-full (or disable)`,
      )
    else problems.push(`COFFER_DATABASE_URL: sslmode must be one of ${PG_SSL_MODES.join(', ')}`)
  } else if (legacy !== null) {
    if (['true', '1'].includes(legacy)) mode = 'verify-full'
    else if (!['false', '0'].includes(legacy))
      problems.push('COFFER_DATABASE_URL: ssl must be true or false (or use sslmode)')
  }
  for (const name of ['sslcert', 'sslkey', 'sslpassword']) {
    if (params.has(name))
      problems.push(
        `COFFER_DATABASE_URL: ${name} (client certificates) is not supported; authenticate with a password over sslmode=verify-full`,
      )
  }
  if (params.has('sslnegotiation') && params.get('sslnegotiation') !== 'postgres')
    problems.push('COFFER_DATABASE_URL: only sslnegotiation=postgres is supported')
  const root = params.get('sslrootcert') ?? undefined
  if (root === '') problems.push('COFFER_DATABASE_URL: sslrootcert must name a file (or system)')
  const rootCert = root === undefined || root === '' || root === 'system' ? undefined : root
  // libpq: `require` with a root certificate checks the chain, as verify-ca.
  if (mode === 'require' && rootCert !== undefined) mode = 'verify-ca'
  if (mode === 'disable' && rootCert !== undefined)
    problems.push('COFFER_DATABASE_URL: sslrootcert is given but sslmode does not ask for TLS')
  return { mode, rootCert }
}

/**
 * What node-postgres is given for a `postgres://` URL: the URL without its TLS parameters, and
 * the `ssl` option they mean. Reads the root certificate file (its error names the file).
 */
export function pgConnection(url: string): {
  connectionString: string
  ssl: false | ConnectionOptions
} {
  const problems: string[] = []
  const settings = pgTlsSettings(url, problems)
  if (problems.length > 0) throw new Error(problems.join('; '))
  return { connectionString: withoutTlsParams(url), ssl: sslOption(settings) }
}

function withoutTlsParams(url: string): string {
  const parsed = new URL(url)
  if (!TLS_PARAMS.some((p) => parsed.searchParams.has(p))) return url
  for (const p of TLS_PARAMS) parsed.searchParams.delete(p)
  return parsed.toString()
}

function sslOption(settings: PgTlsSettings): false | ConnectionOptions {
  if (settings.mode === 'disable') return false
  if (settings.mode === 'require') return { rejectUnauthorized: false }
  let ca: string | undefined
  if (settings.rootCert !== undefined) {
    try {
      ca = readFileSync(settings.rootCert, 'utf8')
    } catch (error) {
      throw new Error(
        `COFFER_DATABASE_URL: sslrootcert ${settings.rootCert} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
      )
    }
  }
  return {
    rejectUnauthorized: true,
    ...(ca !== undefined ? { ca } : {}),
    // verify-ca: the chain only; verify-full keeps Node's host name check.
    ...(settings.mode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}),
  }
}
