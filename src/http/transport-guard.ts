import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'
import type { Config, ServeMode } from '../config.js'

/**
 * Secure by default in production (issue 19): with `COFFER_ENV=production`, a listener that
 * carries credentials (the main API, the consent API) on an address other than loopback must
 * serve TLS itself or be declared behind a proxy that does; else `coffer serve` refuses to
 * start, before anything is written. Development, and loopback in any mode, keep plain HTTP.
 * The metrics listener stays plain HTTP (it carries counts, never credentials or data): off
 * loopback in production it must ask for its bearer token.
 */

/** 127.0.0.0/8 and ::1, in any spelling (IPv4-mapped IPv6 included: BlockList maps it). */
const LOOPBACK = new BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')

export function isLoopbackAddress(address: string): boolean {
  const version = isIP(address)
  return version !== 0 && LOOPBACK.check(address, version === 4 ? 'ipv4' : 'ipv6')
}

/** Every address a name resolves to (`dns.lookup`, as `listen` resolves it). */
export type Resolve = (host: string) => Promise<readonly { address: string }[]>
const resolveAll: Resolve = (host) => lookup(host, { all: true })

/**
 * Whether a listener on `host` is reachable from this machine only: an address as it is, a name
 * when every address it resolves to is loopback. Not only the first: given `localhost`,
 * Fastify binds every address the name resolves to (a hosts file may list it more than once).
 */
export async function isLoopbackHost(host: string, resolve = resolveAll): Promise<boolean> {
  if (isIP(host) !== 0) return isLoopbackAddress(host)
  try {
    const addresses = await resolve(host)
    return addresses.length > 0 && addresses.every(({ address }) => isLoopbackAddress(address))
  } catch {
    // Does not resolve: the listen check names that problem; here it counts as exposed.
    return false
  }
}

const WAYS_OUT = (tlsSettings: string) =>
  `configure TLS (${tlsSettings}), or, when a reverse proxy in front terminates TLS, declare it with COFFER_TLS_TERMINATED_BY_PROXY=true (which also needs COFFER_TRUST_PROXY naming that proxy)`

/** The start errors of the production rule, one per listener that breaks it; none elsewhere. */
export async function transportProblems(config: Config, mode: ServeMode): Promise<string[]> {
  if (config.env !== 'production') return []
  const problems: string[] = []
  const { tls } = config
  const unsafe = async (host: string, hasTls: boolean) =>
    !hasTls && !tls.terminatedByProxy && !(await isLoopbackHost(host))
  if (mode !== 'consent' && (await unsafe(config.host, tls.api !== undefined))) {
    problems.push(
      `COFFER_HOST is ${config.host}, not a loopback address, and COFFER_ENV=production: the main API would carry credentials and data in clear. Either ${WAYS_OUT('COFFER_TLS_CERT_FILE and COFFER_TLS_KEY_FILE')}`,
    )
  }
  if (mode !== 'api' && (await unsafe(config.consentHost, tls.consent !== undefined))) {
    problems.push(
      `COFFER_CONSENT_HOST (by default COFFER_HOST) is ${config.consentHost}, not a loopback address, and COFFER_ENV=production: the consent API would carry consent tokens and customer data in clear. Either ${WAYS_OUT('COFFER_CONSENT_TLS_CERT_FILE and COFFER_CONSENT_TLS_KEY_FILE, or the shared COFFER_TLS_CERT_FILE and COFFER_TLS_KEY_FILE')}`,
    )
  }
  const metrics = config.operations.metrics
  if (
    metrics.port !== undefined &&
    metrics.token === undefined &&
    !(await isLoopbackHost(metrics.host))
  ) {
    problems.push(
      `COFFER_METRICS_HOST is ${metrics.host}, not a loopback address, and COFFER_ENV=production: the metrics listener (plain HTTP) must then ask for a bearer token: set COFFER_METRICS_TOKEN, or keep COFFER_METRICS_HOST on loopback`,
    )
  }
  return problems
}
