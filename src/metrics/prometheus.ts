import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import { CATEGORIES } from '../access/metering.js'
import type { Meter, MeterCounters, MeterHistograms } from './meter.js'

/** A database pool's occupancy (PostgreSQL; SQLite has no pool). */
export interface PoolStats {
  total: number
  idle: number
  waiting: number
}

export type Listener = 'api' | 'consent'

/** The backup schedule's outcome as /metrics shows it (modules/backup/backup-schedule.ts). */
export interface BackupStatsView {
  lastSuccessAt: number | undefined
  lastSizeBytes: number | undefined
  failures: number
}

/** Latency buckets in seconds, from a cached read to a long upload or search. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** Every label value a counter can take, so each series shows (at 0) before it first moves. */
const COUNTER_LABELS: { [N in keyof MeterCounters]: MeterCounters[N][] } = {
  login_failures: [{ reason: 'credentials' }, { reason: 'mfa_required' }],
  login_throttled: [{ reason: 'limit' }, { reason: 'busy' }],
  mfa_failures: [{ operation: 'login' }, { operation: 'unenroll' }],
  sat_uses: [{}],
  blob_bytes: [{ direction: 'in' }, { direction: 'out' }],
  blob_objects_missing: [{ store: 'fs' }, { store: 's3' }],
  storage_floor_refusals: [{}],
  operations_consumed: CATEGORIES.map((category) => ({ category })),
  audit_appends: [
    { outcome: 'ok', path: 'write' },
    { outcome: 'ok', path: 'batch' },
    { outcome: 'failed', path: 'write' },
    { outcome: 'failed', path: 'batch' },
  ],
  backup_runs: [{ outcome: 'ok' }, { outcome: 'failed' }],
}

const COUNTER_HELP: { [N in keyof MeterCounters]: string } = {
  login_failures: 'Logins refused for their credentials or a missing MFA code',
  login_throttled: 'Logins refused by a login limit (429) or a full hashing queue (503)',
  mfa_failures: 'MFA codes refused',
  sat_uses: 'Scoped access token uses taken (each request a SAT is let through)',
  blob_bytes: 'BLOB content bytes received (in) and served (out)',
  blob_objects_missing: 'Downloads refused because the BLOB store lacks the object a BLOB names',
  storage_floor_refusals: 'Writes refused 507 because free space was under COFFER_MIN_FREE_BYTES',
  operations_consumed:
    'Billing operations consumed (the spec table), by category, all accounts together',
  audit_appends:
    'Audit events stored or failed to store (with a write, or in a group-commit batch)',
  backup_runs: 'Scheduled backups this node wrote (ok) or that failed on it (failed)',
}

/**
 * The process's metrics in one prom-client registry (its own, not the library's global one, so
 * several apps in one test process never collide): HTTP requests by route template, the
 * services' counters (through `meter`), the database pool, and prom-client's default process
 * metrics (event-loop lag, heap, GC, file descriptors).
 */
export class Metrics {
  readonly registry = new Registry()
  readonly meter: Meter
  readonly requests: Counter<'listener' | 'method' | 'route' | 'status'>
  readonly requestSeconds: Histogram<'listener' | 'method' | 'route' | 'status'>
  readonly inFlight: Gauge<'listener'>

  constructor() {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry })
    this.requests = new Counter({
      name: 'coffer_http_requests_total',
      help: 'HTTP requests answered, by listener, method, route template and status',
      labelNames: ['listener', 'method', 'route', 'status'],
      registers,
    })
    this.requestSeconds = new Histogram({
      name: 'coffer_http_request_duration_seconds',
      help: 'HTTP request latency, by listener, method, route template and status',
      labelNames: ['listener', 'method', 'route', 'status'],
      buckets: LATENCY_BUCKETS,
      registers,
    })
    this.inFlight = new Gauge({
      name: 'coffer_http_requests_in_flight',
      help: 'HTTP requests received and not yet answered',
      labelNames: ['listener'],
      registers,
    })
    for (const listener of ['api', 'consent'] as const) this.inFlight.set({ listener }, 0)
    const counters = new Map<string, Counter>()
    for (const name of Object.keys(COUNTER_LABELS) as (keyof MeterCounters)[]) {
      const labels = COUNTER_LABELS[name]
      const counter = new Counter({
        name: `coffer_${name}_total`,
        help: COUNTER_HELP[name],
        labelNames: Object.keys(labels[0] ?? {}),
        registers,
      })
      for (const l of labels) counter.inc(l as Record<string, string>, 0)
      counters.set(name, counter)
    }
    const search = new Histogram({
      name: 'coffer_search_duration_seconds',
      help: 'Search query latency, by outcome (ok, stopped by its bound or the client, busy: refused for load, error)',
      labelNames: ['outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    })
    const histograms = new Map<string, Histogram>([['search_duration_seconds', search]])
    this.meter = {
      count: (name, labels, by = 1) =>
        counters.get(name)?.inc(labels as Record<string, string>, by),
      observe: <N extends keyof MeterHistograms>(
        name: N,
        labels: MeterHistograms[N],
        value: number,
      ) => histograms.get(name)?.observe(labels as Record<string, string>, value),
    }
  }

  /** Pool gauges read at each scrape (PostgreSQL; SQLite has no pool and shows none). */
  watchPool(poolStats: () => PoolStats): void {
    const registers = [this.registry]
    new Gauge({
      name: 'coffer_db_pool_connections',
      help: 'Database pool connections, open (total) and unused (idle)',
      labelNames: ['state'],
      registers,
      collect() {
        const stats = poolStats()
        this.set({ state: 'total' }, stats.total)
        this.set({ state: 'idle' }, stats.idle)
      },
    })
    new Gauge({
      name: 'coffer_db_pool_waiting_requests',
      help: 'Queries waiting for a database pool connection',
      registers,
      collect() {
        this.set(poolStats().waiting)
      },
    })
  }

  /**
   * The backup schedule's last outcome, read at each scrape (decisions 238): the same on every
   * node, whichever node wrote the backup. A gauge stays absent until there is a value.
   */
  watchBackups(stats: () => Promise<BackupStatsView>): void {
    const registers = [this.registry]
    new Gauge({
      name: 'coffer_backup_last_success_timestamp_seconds',
      help: 'When the last scheduled backup was written (Unix seconds; any node)',
      registers,
      async collect() {
        const at = (await stats()).lastSuccessAt
        if (at !== undefined) this.set(at)
      },
    })
    new Gauge({
      name: 'coffer_backup_last_size_bytes',
      help: 'Size of the last scheduled backup written, in bytes (any node)',
      registers,
      async collect() {
        const size = (await stats()).lastSizeBytes
        if (size !== undefined) this.set(size)
      },
    })
    new Gauge({
      name: 'coffer_backup_failures',
      help: 'Scheduled backups that failed, on any node, since the schedule began',
      registers,
      async collect() {
        this.set((await stats()).failures)
      },
    })
  }

  get contentType(): string {
    return this.registry.contentType
  }

  text(): Promise<string> {
    return this.registry.metrics()
  }
}
