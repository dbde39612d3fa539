import type { Config, ServeMode } from '../config.js'
import { loadTlsMaterial, type TlsMaterial, TlsMaterialError } from './tls-material.js'
import { CertificateReloader, type ReloadLog, type ReloadTarget } from './tls-reload.js'

/** What each listener of `coffer serve` serves: its proven pair, or nothing (plain HTTP). */
export interface ListenerTls {
  api: TlsMaterial | undefined
  consent: TlsMaterial | undefined
}

/**
 * Loads each served listener's pair at start, before anything is written: a file that cannot
 * be read, a PEM that does not parse or a key that does not match stops the start with the
 * setting named. Client certificates apply to the main API only (config-tls.ts).
 */
export async function loadListenerTls(config: Config, mode: ServeMode): Promise<ListenerTls> {
  const { tls } = config
  const load = async (listener: string, run: () => Promise<TlsMaterial>) => {
    try {
      return await run()
    } catch (error) {
      if (error instanceof TlsMaterialError)
        throw new Error(`cannot serve TLS on ${listener}: ${error.message}`)
      throw error
    }
  }
  const api = mode !== 'consent' ? tls.api : undefined
  const consent = mode !== 'api' ? tls.consent : undefined
  return {
    api: api ? await load('the main API', () => loadTlsMaterial(api, tls.clientAuth)) : undefined,
    consent: consent ? await load('the consent API', () => loadTlsMaterial(consent)) : undefined,
  }
}

export interface ServedListener {
  listener: 'api' | 'consent'
  server: ReloadTarget['server']
  material: TlsMaterial
}

/**
 * Once the TLS listeners listen: logs what each serves, and reloads their pairs on SIGHUP and
 * (COFFER_TLS_WATCH, default on) when the files change. Undefined when no listener serves TLS:
 * SIGHUP then keeps stopping the process, as before.
 */
export function startCertificateReloads(
  config: Config,
  served: ServedListener[],
  log: ReloadLog,
): CertificateReloader | undefined {
  const targets: ReloadTarget[] = []
  for (const { listener, server, material } of served) {
    const files = listener === 'api' ? config.tls.api : config.tls.consent
    if (!files) continue
    const clientAuth = listener === 'api' ? config.tls.clientAuth : undefined
    targets.push({ listener, files, server, material, ...(clientAuth ? { clientAuth } : {}) })
    const leaf = {
      listener,
      subject: material.leaf.subject,
      fingerprint256: material.leaf.fingerprint256,
      valid_to: material.leaf.validTo,
      ...(clientAuth ? { client_certificates: clientAuth.mode } : {}),
    }
    log.info(leaf, 'TLS certificate in service')
    if (material.leaf.expired) log.warn(leaf, 'TLS certificate has expired')
  }
  if (targets.length === 0) return undefined
  const reloader = new CertificateReloader(targets, log)
  reloader.listenForHangup()
  if (config.tls.watchFiles) reloader.watchFiles()
  return reloader
}
