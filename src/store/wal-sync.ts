import { closeSync, fdatasync, openSync } from 'node:fs'

/** fdatasyncs of one WAL at once (WalGroupSync). */
export const WAL_SYNCS_IN_FLIGHT = 3

/**
 * Group fsync of a SQLite file's WAL, on libuv's thread pool instead of the event loop
 * (issue 13: the audit trail's cost on reads; decisions.md "Audit trail").
 *
 * With `synchronous = FULL`, SQLite fsyncs the WAL inside every COMMIT: better-sqlite3 runs it
 * on the event loop, so each audit batch stalled every request for one fsync (~1.3 ms here, 7×
 * the batch's own work). A batch of audit events instead commits with `synchronous = NORMAL`
 * (its frames are written to the WAL, not yet synced) and then waits for `sync()`: an
 * fdatasync of the WAL file that started after its commit. Only then are its requests
 * answered, so every answered request's event is on disk exactly as under FULL. Commits made
 * while fdatasyncs run share the next one (group commit), and the event loop serves other
 * requests meanwhile. Data writes keep FULL (their commit carries their event).
 *
 * Why the WAL's own fdatasync is enough: a commit's frames, its commit marker and the WAL
 * header are all in the WAL file, and fsync covers every page of the file written before it
 * started, whoever wrote it. A checkpoint that moves frames into the database file syncs the
 * WAL first and the database after (NORMAL and FULL alike), so a commit already checkpointed
 * is on disk too. The WAL file only disappears after the last connection's closing checkpoint
 * (never while this process holds the file open): a missing WAL has nothing left to sync.
 */
export class WalGroupSync {
  /** Callers whose commits no fdatasync started after yet. */
  #waiting: { resolve: () => void; reject: (error: unknown) => void }[] = []
  #inFlight = 0

  /**
   * `datasync`: how the file is synced (tests watch the calls; the default is fdatasync).
   * `maxInFlight`: fdatasyncs at once (libuv's pool has 4 threads: more would only queue there).
   */
  readonly #kept = keptDescriptorSync()
  private readonly datasync: (file: string) => Promise<void>

  constructor(
    private readonly walFile: string,
    datasync?: (file: string) => Promise<void>,
    private readonly maxInFlight = WAL_SYNCS_IN_FLIGHT,
  ) {
    this.datasync = datasync ?? this.#kept.datasync
  }

  /** With the store (after its last commit): the kept descriptor is closed. */
  close(): void {
    this.#kept.close()
  }

  /** Resolves once every commit made on the file before this call is on disk. */
  sync(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject })
      this.#pump()
    })
  }

  /**
   * Starts one fdatasync for everyone waiting, unless maxInFlight run already: then they wait
   * for the next start, after the first of those ends. A caller is never answered by a sync
   * that started before it called (its commit could have missed it). Several may run at once:
   * a batch then waits about one sync, not the rest of another's and then its own.
   */
  #pump(): void {
    if (this.#waiting.length === 0 || this.#inFlight >= this.maxInFlight) return
    const group = this.#waiting
    this.#waiting = []
    this.#inFlight++
    this.datasync(this.walFile)
      .then(
        () => {
          for (const caller of group) caller.resolve()
        },
        (error: unknown) => {
          for (const caller of group) caller.reject(error)
        },
      )
      .finally(() => {
        this.#inFlight--
        this.#pump()
      })
  }
}

/**
 * fdatasync of the WAL through one descriptor opened at the first sync and kept (one thread-pool
 * hop per sync, not three): the WAL file keeps its inode while this process holds the database
 * open (truncated in place, never replaced). ENOENT at the first open: nothing to sync yet.
 */
function keptDescriptorSync(): { datasync: (file: string) => Promise<void>; close(): void } {
  let fd: number | undefined
  return {
    datasync(file) {
      if (fd === undefined) {
        try {
          fd = openSync(file, 'r')
        } catch (error) {
          if ((error as { code?: unknown }).code === 'ENOENT') return Promise.resolve()
          return Promise.reject(error)
        }
      }
      const open = fd
      return new Promise((resolve, reject) =>
        fdatasync(open, (error) => (error ? reject(error) : resolve())),
      )
    },
    close() {
      if (fd !== undefined) closeSync(fd)
      fd = undefined
    },
  }
}
