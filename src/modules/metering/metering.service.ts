import { CATEGORIES, type Category } from '../../access/metering.js'
import type { Clock } from '../../lib/clock.js'
import { AppError, ErrorType, errors } from '../../lib/errors.js'
import type { Meter } from '../../metrics/meter.js'
import type { Executor } from '../../store/executor.js'
import type { SettingsService } from '../settings/settings.service.js'
import { CountBuffer } from './count-buffer.js'
import * as repo from './metering.repo.js'

/** Longest range one usage read may span: a year and a day (a leap year, both ends included). */
export const MAX_USAGE_DAYS = 366
/** Increments per statement: 4 parameters each stays well under SQLite's 32,766. */
const KEYS_PER_STATEMENT = 500
const DAY_MS = 86_400_000
/**
 * How long a taken count may wait in memory before it is stored: the usage API and the other
 * nodes' quota checks see it at most this late; a crash loses at most this much.
 */
export const COUNT_FLUSH_MS = 250
/**
 * How long a node keeps an account's quota setting before reading it again: a change made on
 * another node holds here at most this late (a change made here holds at once). Spares every
 * metered read a query for a setting that rarely changes.
 */
export const QUOTA_CACHE_MS = 1000
/** Accounts whose quota a node remembers at once (the cache is emptied when full). */
const QUOTA_CACHE_ENTRIES = 10_000

export interface UsageDay {
  day: string
  /** Every category, 0 when nothing was counted. */
  operations: Record<Category, number>
  total: number
}

/** UTC `YYYY-MM-DD` of a moment. */
export const utcDay = (at: Date) => at.toISOString().slice(0, 10)

/**
 * Operations metering (issue 13, part 3): counts what each request consumed per account, UTC day
 * and category (taken in memory, stored within COUNT_FLUSH_MS by an upsert with increment), reads
 * usage back, and keeps the account's optional daily quota.
 */
export class MeteringService {
  readonly #buffer: CountBuffer
  readonly #quotas = new Map<string, { quota: number | null; until: number }>()
  /** The UTC day `#today` last answered, and when it began (ms). */
  #day = ''
  #dayStart = Number.NaN

  constructor(
    private readonly db: Executor,
    private readonly clock: Clock,
    private readonly settings: SettingsService,
    private readonly meter: Meter,
    /** Told when a batch of counts could not be stored (it is kept and tried again). */
    onFlushError: (error: unknown) => void = () => {},
    flushMs = COUNT_FLUSH_MS,
  ) {
    this.#buffer = new CountBuffer(
      // One statement is atomic by itself (and on SQLite holds the write lock for no await);
      // a larger batch is one transaction.
      (batch) =>
        batch.length <= KEYS_PER_STATEMENT
          ? repo.addAll(this.db, batch)
          : this.db.transaction().execute(async (trx) => {
              for (let i = 0; i < batch.length; i += KEYS_PER_STATEMENT)
                await repo.addAll(trx, batch.slice(i, i + KEYS_PER_STATEMENT))
            }),
      flushMs,
      onFlushError,
    )
  }

  /**
   * Takes `n` operations of `category` for the account on today's UTC day (by the clock); stored
   * within COUNT_FLUSH_MS. Zero counts nothing.
   */
  count(accountId: string, category: Category, n: number): void {
    if (n <= 0) return
    this.#buffer.add({ accountId, day: this.#today(), category, n })
    this.meter.count('operations_consumed', { category }, n)
  }

  /** Today's UTC day by the clock; the text is made once a day, not on every count. */
  #today(): string {
    const ms = this.clock.now().getTime()
    if (!(ms >= this.#dayStart && ms < this.#dayStart + DAY_MS)) {
      this.#dayStart = Math.floor(ms / DAY_MS) * DAY_MS
      this.#day = utcDay(new Date(this.#dayStart))
    }
    return this.#day
  }

  /** Stores every count taken so far (the app calls it when it closes; tests before reading). */
  flush(): Promise<void> {
    return this.#buffer.flush()
  }

  /**
   * 429 OPERATIONS_QUOTA_EXCEEDED when the account has a quota and today's stored count has
   * reached it; Retry-After until the next UTC midnight. Checked before a metered request's
   * work: requests already running are not counted yet (the overshoot, decisions).
   */
  checkQuota(accountId: string): Promise<void> | undefined {
    // Most accounts have no quota: known so, the check costs no promise.
    const known = this.#quotas.get(accountId)
    if (known && known.quota === null && known.until > performance.now()) return undefined
    return this.#checkQuota(accountId)
  }

  async #checkQuota(accountId: string): Promise<void> {
    const quota = await this.#quota(accountId)
    if (quota === null) return
    const now = this.clock.now()
    const day = utcDay(now)
    const used =
      (await repo.dayTotal(this.db, accountId, day)) + this.#buffer.pendingFor(accountId, day)
    if (used < quota) return
    const midnight = Math.floor(now.getTime() / DAY_MS + 1) * DAY_MS
    throw new AppError(
      429,
      ErrorType.rateLimit,
      'OPERATIONS_QUOTA_EXCEEDED',
      `This account has used its daily operations quota (${quota}, the account's ` +
        'daily_operations_quota) for today (UTC); requests that consume operations are refused ' +
        'until the next UTC midnight',
      { retryAfterSeconds: Math.max(1, Math.ceil((midnight - now.getTime()) / 1000)) },
    )
  }

  /** Forgets the account's remembered quota (its settings changed on this node). */
  forgetQuota(accountId: string): void {
    this.#quotas.delete(accountId)
  }

  async #quota(accountId: string): Promise<number | null> {
    const now = performance.now()
    const known = this.#quotas.get(accountId)
    if (known && known.until > now) return known.quota
    const quota = await this.settings.dailyOperationsQuota(accountId)
    if (this.#quotas.size >= QUOTA_CACHE_ENTRIES) this.#quotas.clear()
    this.#quotas.set(accountId, { quota, until: now + QUOTA_CACHE_MS })
    return quota
  }

  /**
   * The account's usage on every day from `from` to `to` (UTC dates, inclusive, at most
   * MAX_USAGE_DAYS), zeroes included, and the range's totals per category.
   */
  async usage(accountId: string, from: string, to: string) {
    // This node's own counts first, so a caller reads what it just consumed here. If they cannot
    // be stored now, the usage is what is stored (they stay buffered and are tried again).
    await this.flush().catch(() => undefined)
    const days = new Map<string, UsageDay>()
    for (let t = Date.parse(from); t <= Date.parse(to); t += DAY_MS) {
      const day = utcDay(new Date(t))
      days.set(day, { day, operations: zeroes(), total: 0 })
    }
    const totals = zeroes()
    for (const row of await repo.between(this.db, accountId, from, to)) {
      const day = days.get(row.day)
      if (!day || !(CATEGORIES as readonly string[]).includes(row.category)) continue
      day.operations[row.category as Category] += row.n
      day.total += row.n
      totals[row.category as Category] += row.n
    }
    return { days: [...days.values()], totals }
  }
}

function zeroes(): Record<Category, number> {
  return Object.fromEntries(CATEGORIES.map((c) => [c, 0])) as Record<Category, number>
}

/** A `from`/`to` query value: a real calendar date `YYYY-MM-DD`, or 400 naming the field. */
export function parseDay(value: unknown, field: 'from' | 'to'): string {
  const text = typeof value === 'string' ? value : ''
  const at = /^\d{4}-\d{2}-\d{2}$/.test(text) ? new Date(`${text}T00:00:00.000Z`) : undefined
  if (!at || Number.isNaN(at.getTime()) || utcDay(at) !== text)
    throw errors.invalidField(field, 'must be a UTC date YYYY-MM-DD')
  return text
}

/** The range's bounds checked: `from` ≤ `to`, at most MAX_USAGE_DAYS days. */
export function parseRange(query: { from?: unknown; to?: unknown }): { from: string; to: string } {
  const from = parseDay(query.from, 'from')
  const to = parseDay(query.to, 'to')
  if (to < from) throw errors.invalidField('to', 'must not be before from')
  const days = (Date.parse(to) - Date.parse(from)) / DAY_MS + 1
  if (days > MAX_USAGE_DAYS)
    throw errors.invalidField('to', `must be at most ${MAX_USAGE_DAYS} days from from (inclusive)`)
  return { from, to }
}
