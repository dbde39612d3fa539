/**
 * Where this process learns that a right may have ended or changed (issue 21): every committed
 * write to a table a cached principal is built from (store/rights-driver.ts finds them by their
 * statement), and on PostgreSQL every such write of another node (store/pg-rights-listener.ts,
 * LISTEN/NOTIFY). Caches subscribe (access/exact-cache.ts) and drop what they hold.
 *
 * Two guards keep a cache exact:
 * - `epoch` grows on every change: a reader takes it before reading the database and stores
 *   its result only if it has not moved, so a read racing a write cannot put back a stale entry
 *   after the write's clear.
 * - `trusted` is false while this process may miss a change (PostgreSQL: the listening
 *   connection is down, or not up yet): caches are then bypassed — fail closed.
 */
export class RightsFeed {
  #epoch = 0
  #trusted: boolean
  #seen = 0
  #sent = 0
  #lastProbe = ''
  readonly #listeners = new Set<() => void>()
  /** Called on first use (PostgreSQL starts its listener lazily: CLI commands never need it). */
  #start: (() => void) | undefined
  /** Asked on every use: true when another process changed the database (SQLite's file). */
  readonly #changedElsewhere: (() => boolean) | undefined

  /** PostgreSQL: the channel the nodes of this schema notify and listen on. */
  readonly channel: string | undefined

  constructor(options: {
    trusted: boolean
    channel?: string
    start?: () => void
    changedElsewhere?: () => boolean
  }) {
    this.channel = options.channel
    this.#trusted = options.trusted
    this.#start = options.start
    this.#changedElsewhere = options.changedElsewhere
  }

  /** Changes counted so far: the reader's token, checked again before storing. */
  get epoch(): number {
    this.#kick()
    return this.#epoch
  }

  /** Whether a cache may be used now (SQLite: always; PostgreSQL: while the listener is up). */
  get trusted(): boolean {
    this.#kick()
    return this.#trusted
  }

  /** Notifications received from the database (tests wait on it; never used for decisions). */
  get notificationsSeen(): number {
    return this.#seen
  }

  /** A right may have changed: every cache drops everything it holds. */
  changed(): void {
    this.#epoch++
    for (const listener of this.#listeners) listener()
  }

  /** Notifications this process's committed writes sent (PostgreSQL; tests wait on it). */
  get notificationsSent(): number {
    return this.#sent
  }

  /** A write of this process sent a notification, and it has committed. */
  sent(): void {
    this.#sent++
  }

  /** The last probe received: a notification with a payload, sent to check delivery. */
  get lastProbe(): string {
    return this.#lastProbe
  }

  /**
   * A notification: an empty payload announces a change (another node's write, or this
   * node's own). One with a payload is a probe (`select pg_notify(channel, 'name')`): it changes
   * nothing, and once it has arrived so has every notification committed before it (PostgreSQL
   * delivers them in commit order), which is how an operator or a test knows a node caught up.
   */
  notified(payload: string): void {
    if (payload !== '') {
      this.#lastProbe = payload
      return
    }
    this.changed()
    this.#seen++
  }

  /** The listener's state: going down or coming back up both drop every cache. */
  setTrusted(trusted: boolean): void {
    this.#trusted = trusted
    this.changed()
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  #kick(): void {
    if (this.#changedElsewhere?.()) this.changed()
    const start = this.#start
    if (!start) return
    this.#start = undefined
    start()
  }
}

/**
 * Tables a cached principal is read from (credentials.repo.ts findUsableWithPolicies), and
 * `vaults` (cached rows): a write to one may end, narrow or widen a right. A new credential,
 * user or vault row changes no cached entry (only rows found are cached), so a plain insert
 * into those is left out: logins and user creation do not empty the cache.
 */
const RIGHTS_WRITE =
  /\b(?:update(?:\s+or\s+\w+)?|delete\s+from|insert(?:\s+or\s+\w+)?\s+into|replace\s+into|merge\s+into)\s+(?:"?\w+"?\.)?"?(users|credentials|groups|group_members|account_settings|accounts|vaults)"?(?=[\s(]|$)/i

/** Statements are few and repeat: each text's answer is kept (short texts, a bounded count). */
const MEMO_MAX_ENTRIES = 1024
const MEMO_MAX_SQL_LENGTH = 4096
const memo = new Map<string, boolean>()

export function isRightsWrite(sqlText: string): boolean {
  const known = memo.get(sqlText)
  if (known !== undefined) return known
  const answer = classify(sqlText)
  if (sqlText.length <= MEMO_MAX_SQL_LENGTH) {
    if (memo.size >= MEMO_MAX_ENTRIES) memo.clear()
    memo.set(sqlText, answer)
  }
  return answer
}

function classify(sqlText: string): boolean {
  const match = RIGHTS_WRITE.exec(sqlText)
  if (!match) return false
  const table = (match[1] as string).toLowerCase()
  // Only `insert into` adds rows alone: SQLite's `insert or replace` / `replace into` delete the
  // row they collide with (a credential or membership could end that way), so they count.
  const plainInsert = /^\s*insert\s+into\b/i.test(sqlText) && !/\bon\s+conflict\b/i.test(sqlText)
  return !(plainInsert && (table === 'credentials' || table === 'users' || table === 'vaults'))
}
