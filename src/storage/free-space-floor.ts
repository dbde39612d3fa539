import { statfs } from 'node:fs/promises'
import type { Meter } from '../metrics/meter.js'
import { noopMeter } from '../metrics/meter.js'

/** The default floor, whichever is smaller (like Elasticsearch's flood-stage watermark). */
export const DEFAULT_FLOOR_BYTES = 1024 ** 3
export const DEFAULT_FLOOR_FRACTION = 0.05
/** How long one reading of the free space is trusted: writes pay one statfs per interval. */
export const FREE_SPACE_REFRESH_MS = 1000

/** What `statfs` tells: available blocks (to this unprivileged user), their size, the total. */
export interface FsSpace {
  bavail: number
  bsize: number
  blocks: number
}

export interface FolderSpace {
  path: string
  freeBytes: number
  floorBytes: number
}

export interface FreeSpaceFloorOptions {
  /** Folders whose file systems are watched: the SQLite file's folder, the BLOB folder. */
  paths: string[]
  /** Bytes that must stay free (COFFER_MIN_FREE_BYTES); undefined: min(1 GiB, 5 % of the size). */
  minFreeBytes: number | undefined
  refreshMs?: number
  statfs?: (path: string) => Promise<FsSpace>
  meter?: Meter
  /** Told once on entering and once on leaving the refusing state (a warning log line). */
  onChange?: (refusing: boolean, folders: FolderSpace[]) => void
}

function logChange(refusing: boolean, folders: FolderSpace[]): void {
  const msg = refusing
    ? 'free space below COFFER_MIN_FREE_BYTES: writes refused (507), reads served'
    : 'free space back above COFFER_MIN_FREE_BYTES: writes accepted again'
  process.stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), msg, folders })}\n`)
}

/** The floor of one file system: the setting, or min(1 GiB, 5 %) of its size. */
export function floorBytes(space: FsSpace, minFreeBytes: number | undefined): number {
  if (minFreeBytes !== undefined) return minFreeBytes
  return Math.min(
    DEFAULT_FLOOR_BYTES,
    Math.floor(space.blocks * space.bsize * DEFAULT_FLOOR_FRACTION),
  )
}

/**
 * Refuses writes while a watched file system has less free space than its floor, so SQLite and
 * the BLOB store never meet ENOSPC halfway through a write. The reading is cached for
 * `refreshMs`: a write pays one `statfs` per interval at most, and the state lifts by itself
 * once space returns (at the first write or `/readyz` after it).
 */
export class FreeSpaceFloor {
  readonly #options: Required<Omit<FreeSpaceFloorOptions, 'minFreeBytes'>> & {
    minFreeBytes: number | undefined
  }
  #refusing = false
  #folders: FolderSpace[] = []
  #readAt = Number.NEGATIVE_INFINITY
  #reading: Promise<void> | undefined

  constructor(options: FreeSpaceFloorOptions) {
    this.#options = {
      refreshMs: FREE_SPACE_REFRESH_MS,
      statfs: (path) => statfs(path),
      meter: noopMeter,
      onChange: logChange,
      ...options,
    }
  }

  /** Watches nothing, never refuses (tests, and commands other than `serve`). */
  static disabled(): FreeSpaceFloor {
    return new FreeSpaceFloor({ paths: [], minFreeBytes: 0 })
  }

  /** False when nothing is watched or COFFER_MIN_FREE_BYTES is 0: writes are never refused. */
  get enabled(): boolean {
    return this.#options.paths.length > 0 && this.#options.minFreeBytes !== 0
  }

  /** True while writes are refused; reads the file systems again when the last reading is stale. */
  async refusing(): Promise<boolean> {
    if (!this.enabled) return false
    if (performance.now() - this.#readAt >= this.#options.refreshMs) await this.refresh()
    return this.#refusing
  }

  /** The last reading, per folder (for `/readyz`). */
  get folders(): FolderSpace[] {
    return this.#folders
  }

  /** Reads every watched file system now; concurrent callers share one reading. */
  refresh(): Promise<void> {
    this.#reading ??= this.#read().finally(() => {
      this.#reading = undefined
    })
    return this.#reading
  }

  /** Counts one write refused by the floor. */
  countRefusal(): void {
    this.#options.meter.count('storage_floor_refusals', {})
  }

  async #read(): Promise<void> {
    const { paths, minFreeBytes } = this.#options
    const folders = await Promise.all(
      paths.map(async (path) => {
        // A folder that cannot be read (not mounted) is the readiness check's business.
        const space = await this.#options.statfs(path).catch(() => undefined)
        if (!space) return undefined
        return {
          path,
          freeBytes: space.bavail * space.bsize,
          floorBytes: floorBytes(space, minFreeBytes),
        }
      }),
    )
    this.#folders = folders.filter((f): f is FolderSpace => f !== undefined)
    this.#readAt = performance.now()
    const refusing = this.#folders.some((f) => f.freeBytes < f.floorBytes)
    if (refusing !== this.#refusing) {
      this.#refusing = refusing
      this.#options.onChange(refusing, this.#folders)
    }
  }
}
