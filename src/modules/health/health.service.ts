import type { Kysely } from 'kysely'
import type { BlobStore } from '../../blob/blob-store.js'
import { FreeSpaceFloor } from '../../storage/free-space-floor.js'
import type { Database } from '../../store/schema.js'
import { pendingMigrations, pingDatabase } from './health.repo.js'

/** Names of the readiness checks, as `GET /readyz` reports them (fixed, documented). */
export type ReadinessCheck = 'shutting_down' | 'database' | 'migrations' | 'blob_store'

/** Default bound on each readiness check (COFFER_READY_TIMEOUT_MS). */
export const DEFAULT_READY_TIMEOUT_MS = 2000

class CheckTimeout extends Error {}

/** Rejects when `work` has not settled within `ms`; the timer never keeps the process alive. */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout()), ms)
    timer.unref()
  })
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
}

/**
 * Liveness and readiness of this node for load balancers. Readiness asks the database for
 * `select 1`, checks that every known migration is applied and that the BLOB store answers,
 * each bounded by `timeoutMs`, in parallel: a probe answers within about one bound whatever
 * hangs. Once shutdown begins (`startDraining`) the node is never ready again, so the balancer
 * stops sending it new requests; it still serves them until `startClosing` (after the drain
 * delay), when the listeners close and what still reaches the apps is refused.
 */
export class HealthService {
  #draining = false
  #closing = false
  /** Migrations never go back by themselves: once all are applied, the check is not repeated. */
  #migrated = false

  constructor(
    private readonly db: Kysely<Database>,
    private readonly blobs: BlobStore,
    private readonly timeoutMs = DEFAULT_READY_TIMEOUT_MS,
    private readonly freeSpace = FreeSpaceFloor.disabled(),
  ) {}

  /**
   * True while writes are refused for want of free space (COFFER_MIN_FREE_BYTES). The node
   * stays ready: it still serves every read, so a balancer must not take it out.
   */
  async writesRefused(): Promise<boolean> {
    if (!this.freeSpace.enabled) return false
    // A hung statfs (a dead network mount) must not hang the probe: past the bound, the last
    // reading stands.
    await within(this.freeSpace.refresh(), this.timeoutMs).catch(() => undefined)
    return this.freeSpace.refusing()
  }

  get draining(): boolean {
    return this.#draining
  }

  startDraining(): void {
    this.#draining = true
  }

  /** True once the listeners are closing: requests are refused (see addShutdownGate). */
  get closing(): boolean {
    return this.#closing
  }

  startClosing(): void {
    this.#draining = true
    this.#closing = true
  }

  /** The checks that fail now (empty: ready). Never rejects: a failure is a name in the list. */
  async failingChecks(): Promise<ReadinessCheck[]> {
    if (this.#draining) return ['shutting_down']
    const checks: [ReadinessCheck, () => Promise<unknown>][] = [
      ['database', () => pingDatabase(this.db)],
      ['migrations', () => this.#checkMigrations()],
      ['blob_store', () => this.blobs.check()],
    ]
    const results = await Promise.allSettled(checks.map(([, run]) => within(run(), this.timeoutMs)))
    const failing = checks.filter((_, i) => results[i]?.status === 'rejected').map(([n]) => n)
    // A node that started draining meanwhile is not ready, whatever the checks said.
    return this.#draining ? ['shutting_down', ...failing] : failing
  }

  async #checkMigrations(): Promise<void> {
    if (this.#migrated) return
    const pending = await pendingMigrations(this.db)
    if (pending.length > 0) throw new Error(`${pending.length} migrations pending`)
    this.#migrated = true
  }
}
