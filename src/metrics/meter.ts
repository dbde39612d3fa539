import type { Category } from '../access/metering.js'

/**
 * What services count and time, without knowing how it is exported (metrics/prometheus.ts does
 * that): services receive a Meter through their dependencies and never import prom-client.
 * Every name and label value is fixed here: nothing a client sends (ids, usernames, URLs,
 * secrets) can become a label.
 */
export interface MeterCounters {
  /** A login refused for its credentials (`credentials`) or a missing MFA code (`mfa_required`). */
  login_failures: { reason: 'credentials' | 'mfa_required' }
  /** A login refused by a limit (`limit`, 429) or a full hashing queue (`busy`, 503). */
  login_throttled: { reason: 'limit' | 'busy' }
  /** An MFA code refused, by where it was given. */
  mfa_failures: { operation: 'login' | 'unenroll' }
  /** One use of a scoped access token taken (each request a SAT is let through). */
  sat_uses: Record<string, never>
  /** BLOB content bytes (plaintext) received (`in`) and served (`out`). */
  blob_bytes: { direction: 'in' | 'out' }
  /** A download whose BLOB row names an object the store does not have, by kind of store. */
  blob_objects_missing: { store: 'fs' | 's3' }
  /** A write refused 507 because free space was under COFFER_MIN_FREE_BYTES. */
  storage_floor_refusals: Record<string, never>
  /** Billing operations consumed (issue 13), by category; never by account (cardinality). */
  operations_consumed: { category: Category }
  /** Audit events stored (`ok`) or that could not be (`failed`), by how: with a write or batched. */
  audit_appends: { outcome: 'ok' | 'failed'; path: 'write' | 'batch' }
  /** Scheduled backups this node wrote (`ok`) or that failed on it (`failed`). */
  backup_runs: { outcome: 'ok' | 'failed' }
}

export interface MeterHistograms {
  /** Seconds one search query ran, by how it ended. */
  search_duration_seconds: { outcome: 'ok' | 'stopped' | 'busy' | 'error' }
}

export interface Meter {
  count<N extends keyof MeterCounters>(name: N, labels: MeterCounters[N], by?: number): void
  observe<N extends keyof MeterHistograms>(name: N, labels: MeterHistograms[N], value: number): void
}

/** The default: metrics off (tests, commands other than `serve`, `serve` without metrics). */
export const noopMeter: Meter = {
  count: () => {},
  observe: () => {},
}

/** Seconds since `start` (a `performance.now()` reading). */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000
}
