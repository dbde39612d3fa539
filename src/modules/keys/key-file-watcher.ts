import { type FSWatcher, watch } from 'node:fs'
import { basename, dirname } from 'node:path'
import type { MasterKey } from '../../crypto/master-key.js'
import type { MasterKeySet } from '../../crypto/master-key-set.js'
import { dataKeyStore } from '../../store/data-keys.repo.js'
import type { Store } from '../../store/db.js'
import { type MasterKeyConfig, readCurrentKey, readPreviousKeys } from './master-key-source.js'

/** Events of one rename settle within this time; the files are read once after it. */
export const KEY_FILE_DEBOUNCE_MS = 200
/** The files are also read on this period: fs.watch can miss events (network file systems). */
export const KEY_FILE_CHECK_INTERVAL_MS = 2000

export interface KeyFileWatch {
  /** Reads the key files now and applies a change; resolves once applied. */
  check(): Promise<void>
  stop(): void
}

/**
 * Keeps a serving node's master keys in step with its key files, without a restart or a signal:
 * `coffer keys rotate` on the embedded key file writes the new key file (and the previous-keys
 * file) and this node holds the new key within a debounce, or a check period at worst. A key
 * the files no longer name is dropped only once no data key is wrapped by it any more (the
 * re-wrap is done), so an early removal of the previous-keys file never locks data out. A file
 * that does not parse leaves the keys as they are (and is logged).
 */
export function watchKeyFiles(options: {
  config: MasterKeyConfig
  keys: MasterKeySet
  store: Store
  log: (msg: object, text: string) => void
  debounceMs?: number
  intervalMs?: number
}): KeyFileWatch {
  const { config, keys, store, log } = options
  const debounceMs = options.debounceMs ?? KEY_FILE_DEBOUNCE_MS
  let lastProblem = ''
  let running: Promise<void> | undefined
  let again = false

  /** The keys the files name now, or undefined when a file does not parse. */
  const read = (): { current: MasterKey; previous: MasterKey[] } | undefined => {
    try {
      const found = { current: readCurrentKey(config), previous: readPreviousKeys(config) }
      lastProblem = ''
      return found
    } catch (error) {
      const problem = error instanceof Error ? error.message : String(error)
      // Logged once per distinct problem, not every period; never the file's content.
      if (problem !== lastProblem) log({ error: problem }, 'master key files not read; keys kept')
      lastProblem = problem
      return undefined
    }
  }

  const apply = async (): Promise<void> => {
    const found = read()
    if (!found) return
    const named = new Set([found.current.id, ...found.previous.map((k) => k.id)])
    const dropped = keys.all().filter((k) => !named.has(k.id))
    const kept = dropped.length > 0 ? await stillWrapping(dropped) : []
    const next = [found.current.id, ...found.previous.map((k) => k.id), ...kept.map((k) => k.id)]
    const unchanged =
      next.length === keys.all().length && next.every((id, i) => keys.fingerprints()[i] === id)
    if (unchanged) return
    keys.replace(found.current, [...found.previous, ...kept])
    log(
      { current: keys.current.id, previous: keys.previous.map((k) => k.id) },
      'master keys reloaded from the key files',
    )
  }

  /** The keys among `dropped` that some data key still names. */
  const stillWrapping = async (dropped: MasterKey[]): Promise<MasterKey[]> => {
    try {
      const refs = await dataKeyStore(store.db).wrappedBy()
      return dropped.filter((k) =>
        refs.some(
          (r) =>
            r.master_key_fingerprint === k.id ||
            (r.master_key_fingerprint === null && r.master_key_id === k.legacyId),
        ),
      )
    } catch {
      // The database is unreachable now: keep every key until the next check can tell.
      return dropped
    }
  }

  const check = (): Promise<void> => {
    if (running !== undefined) {
      again = true
      return running
    }
    running = apply()
      .catch((error) =>
        log({ error: error instanceof Error ? error.message : String(error) }, 'key reload failed'),
      )
      .finally(() => {
        running = undefined
        if (again) {
          again = false
          void check()
        }
      })
    return running
  }

  // A data key naming a fingerprint not held: the key file may have just been replaced.
  keys.onUnknownKey(() => {
    const found = read()
    if (found) keys.replace(found.current, [...found.previous, ...keys.all()])
  })

  let timer: NodeJS.Timeout | undefined
  const soon = () => {
    clearTimeout(timer)
    timer = setTimeout(() => void check(), debounceMs)
    timer.unref()
  }
  const names = new Set([basename(config.masterKeyFile), basename(config.masterKeyPreviousFile)])
  const watchers: FSWatcher[] = []
  for (const folder of new Set([
    dirname(config.masterKeyFile),
    dirname(config.masterKeyPreviousFile),
  ])) {
    try {
      const watcher = watch(folder, { persistent: false }, (_event, name) => {
        // Temp files are renamed into place: the rename names the final file (or no name at all).
        if (!name || names.has(name.toString())) soon()
      })
      watcher.on('error', () => {})
      watchers.push(watcher)
    } catch {
      // Cannot watch (the folder is missing, or too many watches): the period still checks.
    }
  }
  const interval = setInterval(() => void check(), options.intervalMs ?? KEY_FILE_CHECK_INTERVAL_MS)
  interval.unref()
  return {
    check,
    stop() {
      clearInterval(interval)
      clearTimeout(timer)
      for (const w of watchers) w.close()
    },
  }
}
