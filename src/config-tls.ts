import { resolve } from 'node:path'

/**
 * Transport security (issue 19): the TLS settings of both listeners, read and checked for
 * syntax here. Whether the files can be read and the pair loads is checked when `coffer serve`
 * starts, before anything is written (http/tls-material.ts), and the production rule (no
 * credential in clear on a non-loopback address) there too (http/transport-guard.ts): other
 * commands (`coffer migrate`, `account create`) never read these files.
 */

/** A certificate chain and its key, as PEM files, with the settings that named them. */
export interface TlsPairFiles {
  certFile: string
  keyFile: string
  /** `COFFER_TLS_CERT_FILE`, `COFFER_TLS_KEY_FILE`: start errors and log lines name them. */
  certSetting: string
  keySetting: string
}

export type ClientAuthMode = 'require' | 'optional'
export const CLIENT_AUTH_MODES: readonly ClientAuthMode[] = ['require', 'optional']

export interface TlsConfig {
  /** The main API's pair; undefined: plain HTTP. */
  api: TlsPairFiles | undefined
  /** The consent API's: its own pair when given, else the main API's. */
  consent: TlsPairFiles | undefined
  /**
   * Client certificates on the main API (the consent API is called by storefronts and browsers,
   * which carry none): the CA that issues them, and whether one is required or only checked
   * when presented. Undefined: none asked for.
   */
  clientAuth: { caFile: string; mode: ClientAuthMode } | undefined
  /** Strict-Transport-Security max-age, in seconds, on every answer over TLS. */
  hstsMaxAgeSeconds: number
  /** The operator declares that a reverse proxy terminates TLS (production guard). */
  terminatedByProxy: boolean
  /** Reload a listener's pair when its files change (SIGHUP reloads in any case). */
  watchFiles: boolean
}

/** One year: what browsers and the HSTS preload list expect at least. */
export const DEFAULT_HSTS_MAX_AGE_SECONDS = 31_536_000
/** Two years: the longest max-age in common use (hstspreload.org); more is a typo. */
export const MAX_HSTS_MAX_AGE_SECONDS = 63_072_000

type Flag = (name: string, raw: string | undefined, problems: string[]) => boolean
type Int = (name: string, fallback: number, min: number, max: number) => number

/** Both settings of a pair, or neither; relative paths from the working directory. */
function pair(
  env: NodeJS.ProcessEnv,
  certName: string,
  keyName: string,
  problems: string[],
): TlsPairFiles | undefined {
  const cert = env[certName]?.trim() || undefined
  const key = env[keyName]?.trim() || undefined
  if (cert === undefined && key === undefined) return undefined
  if (cert === undefined || key === undefined) {
    problems.push(
      `${certName} and ${keyName} go together: give both (the certificate chain and its key, PEM), or neither`,
    )
    return undefined
  }
  return {
    certFile: resolve(cert),
    keyFile: resolve(key),
    certSetting: certName,
    keySetting: keyName,
  }
}

export function tlsSettings(
  env: NodeJS.ProcessEnv,
  read: { flag: Flag; int: Int },
  /** Whether any proxy is trusted (config.ts's TrustProxy is false when none is). */
  trustsAProxy: boolean,
  problems: string[],
): TlsConfig {
  const api = pair(env, 'COFFER_TLS_CERT_FILE', 'COFFER_TLS_KEY_FILE', problems)
  const consentOwn = pair(
    env,
    'COFFER_CONSENT_TLS_CERT_FILE',
    'COFFER_CONSENT_TLS_KEY_FILE',
    problems,
  )
  const caFile = env.COFFER_TLS_CLIENT_CA_FILE?.trim() || undefined
  const modeRaw = env.COFFER_TLS_CLIENT_AUTH?.trim() || undefined
  if (modeRaw !== undefined && !CLIENT_AUTH_MODES.includes(modeRaw as ClientAuthMode)) {
    problems.push('COFFER_TLS_CLIENT_AUTH must be require or optional')
  }
  if (modeRaw !== undefined && caFile === undefined) {
    problems.push(
      'COFFER_TLS_CLIENT_AUTH needs COFFER_TLS_CLIENT_CA_FILE: the CA that issues the client certificates',
    )
  }
  if (caFile !== undefined && api === undefined) {
    problems.push(
      'COFFER_TLS_CLIENT_CA_FILE needs TLS on the main API (COFFER_TLS_CERT_FILE and COFFER_TLS_KEY_FILE)',
    )
  }
  const terminatedByProxy = read.flag(
    'COFFER_TLS_TERMINATED_BY_PROXY',
    env.COFFER_TLS_TERMINATED_BY_PROXY,
    problems,
  )
  // The proxy's X-Forwarded-Proto is what tells an answer went out over TLS (HSTS): without a
  // trusted proxy, the declaration could not be true of any request.
  if (terminatedByProxy && !trustsAProxy) {
    problems.push(
      'COFFER_TLS_TERMINATED_BY_PROXY=true needs COFFER_TRUST_PROXY: the address (or hop count) of the proxy that terminates TLS',
    )
  }
  // A typo such as `yes please` must not silently turn watching off; `flag` refuses it.
  const watchRaw = env.COFFER_TLS_WATCH
  const watchFiles =
    watchRaw === undefined || watchRaw.trim() === ''
      ? true
      : read.flag('COFFER_TLS_WATCH', watchRaw, problems)
  return Object.freeze({
    api,
    consent: consentOwn ?? api,
    clientAuth:
      caFile === undefined
        ? undefined
        : {
            caFile: resolve(caFile),
            mode: (modeRaw ?? 'require') as ClientAuthMode,
          },
    hstsMaxAgeSeconds: read.int(
      'COFFER_HSTS_MAX_AGE_SECONDS',
      DEFAULT_HSTS_MAX_AGE_SECONDS,
      0,
      MAX_HSTS_MAX_AGE_SECONDS,
    ),
    terminatedByProxy,
    watchFiles,
  })
}
