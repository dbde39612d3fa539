import { type FSWatcher, unwatchFile, watch, watchFile } from 'node:fs'
import { dirname } from 'node:path'
import type { SecureContextOptions } from 'node:tls'
import type { TlsPairFiles } from '../config-tls.js'
import {
  type ClientAuthFiles,
  loadTlsMaterial,
  secureContextOptions,
  type TlsMaterial,
} from './tls-material.js'

/**
 * Certificate rotation without a restart (issue 19): on SIGHUP, and when a listener's files
 * change, each TLS listener reads its pair again, proves it loads (tls-material.ts) and only
 * then swaps it in with `setSecureContext`: connections opened from then on get the new
 * certificate, open ones go on untouched, and a pair that does not load is refused with a log
 * line while the one in service stays.
 */

/**
 * Quiet time after the last file event before reading the files: certbot swaps four symlinks,
 * `cp cert key` writes two files, an editor writes a temporary file and renames it; reading in
 * between would see a new certificate with the old key (refused, logged, then loaded a moment
 * later). Half a second covers all three and still feels immediate.
 */
export const RELOAD_DEBOUNCE_MS = 500
/**
 * The fallback when directory events do not arrive (network file systems, some container
 * mounts): each file's status is polled this often (Node's own default interval).
 */
export const RELOAD_POLL_MS = 5007

export interface ReloadTarget {
  /** `api` or `consent`: log lines name the listener. */
  listener: string
  files: TlsPairFiles
  clientAuth?: ClientAuthFiles
  server: { setSecureContext(options: SecureContextOptions): void }
  /** What the listener serves now. */
  material: TlsMaterial
}

export interface ReloadLog {
  info(obj: object, msg: string): void
  warn(obj: object, msg: string): void
  error(obj: object, msg: string): void
}

export type ReloadOutcome = 'reloaded' | 'unchanged' | 'refused'

export class CertificateReloader {
  readonly #targets: ReloadTarget[]
  readonly #log: ReloadLog
  readonly #debounceMs: number
  readonly #pollMs: number
  readonly #watchers: FSWatcher[] = []
  readonly #polled: string[] = []
  #timer: NodeJS.Timeout | undefined
  #queue: Promise<unknown> = Promise.resolve()
  #stopped = false
  readonly #onHangup = () => {
    void this.reload('SIGHUP')
  }
  readonly #onFileEvent = () => this.#schedule()

  constructor(
    targets: ReloadTarget[],
    log: ReloadLog,
    options: { debounceMs?: number; pollMs?: number } = {},
  ) {
    this.#targets = targets
    this.#log = log
    this.#debounceMs = options.debounceMs ?? RELOAD_DEBOUNCE_MS
    this.#pollMs = options.pollMs ?? RELOAD_POLL_MS
  }

  /** Reloads on SIGHUP. The process then no longer stops on it (see closeOnSignals). */
  listenForHangup(): void {
    process.on('SIGHUP', this.#onHangup)
  }

  /**
   * Reloads when a file changes. The folders are watched, not the files: certbot replaces the
   * symlinks in `live/` (a watch on a file follows the old target for ever), editors rename a
   * new file over the old one, Kubernetes swaps a `..data` link; any event in the folder
   * schedules a read, and a pair that did not change is left alone. Each file's status is also
   * polled, for file systems without events.
   */
  watchFiles(): void {
    const files = new Set<string>()
    for (const t of this.#targets) {
      files.add(t.files.certFile)
      files.add(t.files.keyFile)
      if (t.clientAuth) files.add(t.clientAuth.caFile)
    }
    for (const dir of new Set([...files].map((f) => dirname(f)))) {
      try {
        const watcher = watch(dir, { persistent: false }, this.#onFileEvent)
        watcher.on('error', (error) => {
          this.#log.warn(
            { folder: dir, error: error.message },
            'TLS files: folder watch failed; polling the files instead',
          )
          watcher.close()
        })
        this.#watchers.push(watcher)
      } catch (error) {
        this.#log.warn(
          { folder: dir, error: (error as Error).message },
          'TLS files: cannot watch the folder; polling the files instead',
        )
      }
    }
    for (const file of files) {
      watchFile(file, { persistent: false, interval: this.#pollMs }, (now, before) => {
        if (now.mtimeMs !== before.mtimeMs || now.ino !== before.ino || now.size !== before.size)
          this.#schedule()
      })
      this.#polled.push(file)
    }
  }

  /** Stops watching and listening (shutdown): nothing of it keeps the process alive. */
  stop(): void {
    this.#stopped = true
    clearTimeout(this.#timer)
    process.off('SIGHUP', this.#onHangup)
    for (const watcher of this.#watchers.splice(0)) watcher.close()
    for (const file of this.#polled.splice(0)) unwatchFile(file)
  }

  /**
   * Reads every listener's pair again and swaps in those that changed and load. One reload at a
   * time: a signal during a reload runs another one after it.
   */
  reload(reason: string): Promise<ReloadOutcome[]> {
    clearTimeout(this.#timer)
    const run = this.#queue.then(() =>
      Promise.all(this.#targets.map((target) => this.#reloadOne(target, reason))),
    )
    this.#queue = run.catch(() => {})
    return run
  }

  #schedule(): void {
    if (this.#stopped) return
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => void this.reload('file change'), this.#debounceMs)
  }

  async #reloadOne(target: ReloadTarget, reason: string): Promise<ReloadOutcome> {
    const where = {
      listener: target.listener,
      reason,
      cert_file: target.files.certFile,
      key_file: target.files.keyFile,
    }
    let next: TlsMaterial
    try {
      next = await loadTlsMaterial(target.files, target.clientAuth)
    } catch (error) {
      this.#log.error(
        { ...where, error: (error as Error).message },
        'TLS certificate not reloaded: the new files do not load; the certificate in service stays',
      )
      return 'refused'
    }
    const leaf = {
      subject: next.leaf.subject,
      fingerprint256: next.leaf.fingerprint256,
      valid_to: next.leaf.validTo,
    }
    if (next.digest === target.material.digest) {
      // A folder event about some other file: nothing to say unless an operator asked.
      if (reason === 'SIGHUP') this.#log.info({ ...where, ...leaf }, 'TLS certificate unchanged')
      return 'unchanged'
    }
    try {
      target.server.setSecureContext(secureContextOptions(next))
    } catch (error) {
      this.#log.error(
        { ...where, error: (error as Error).message },
        'TLS certificate not reloaded: the new files do not load; the certificate in service stays',
      )
      return 'refused'
    }
    target.material = next
    this.#log.info({ ...where, ...leaf }, 'TLS certificate reloaded')
    if (next.leaf.expired) this.#log.warn({ ...where, ...leaf }, 'TLS certificate has expired')
    return 'reloaded'
  }
}
