import type { ConnectionOptions } from 'node:tls'
import type pg from 'pg'
import { pgModule } from './pg-module.js'
import type { RightsFeed } from './rights-feed.js'

/** First wait before reconnecting the listener, doubled per failure up to the second bound. */
export const LISTENER_RETRY_MIN_MS = 50
export const LISTENER_RETRY_MAX_MS = 5000
/**
 * How often the listening connection proves it is alive: a connection that dies silently (a
 * dropped route, a firewall forgetting the flow) raises no 'error' or 'end' for as long as TCP
 * keepalive takes (hours by default), and meanwhile the node would trust a feed that hears
 * nothing. A round trip that does not come back within the connect timeout fails it (closed).
 */
export const LISTENER_HEARTBEAT_MS = 1000

export interface RightsListenerOptions {
  /** The pool's connection string and TLS option (pg-tls.ts). */
  connection: { connectionString: string; ssl: false | ConnectionOptions }
  channel: string
  connectTimeoutMs: number
  applicationName?: string
  /** Told when the listening connection fails (never with the URL). */
  onError: (error: Error) => void
}

/**
 * The PostgreSQL side of the rights feed (issue 21): one dedicated connection, outside the pool
 * (a pooled one is handed to requests and may be closed when idle), that LISTENs on the
 * channel every rights write NOTIFYs (store/rights-driver.ts). Fail closed: the feed is trusted
 * only from the moment LISTEN has been acknowledged; when the connection fails it is distrusted
 * at once (every cache bypassed and emptied) and reconnected with exponential backoff, and once
 * back the caches are emptied again (a notification may have been missed meanwhile).
 */
export class PgRightsListener {
  #client: pg.Client | undefined
  #retryMs = LISTENER_RETRY_MIN_MS
  #timer: NodeJS.Timeout | undefined
  #heartbeat: NodeJS.Timeout | undefined
  #closed = false

  constructor(
    private readonly feed: RightsFeed,
    private readonly options: RightsListenerOptions,
  ) {}

  start(): void {
    void this.#connect()
  }

  async close(): Promise<void> {
    this.#closed = true
    if (this.#timer) clearTimeout(this.#timer)
    if (this.#heartbeat) clearInterval(this.#heartbeat)
    const client = this.#client
    this.#client = undefined
    await client?.end().catch(() => undefined)
  }

  async #connect(): Promise<void> {
    if (this.#closed) return
    const client = new (pgModule().Client)({
      ...this.options.connection,
      connectionTimeoutMillis: this.options.connectTimeoutMs,
      keepAlive: true,
      ...(this.options.applicationName ? { application_name: this.options.applicationName } : {}),
    })
    this.#client = client
    let failed = false
    let heartbeat: NodeJS.Timeout | undefined
    const fail = (error: Error) => {
      if (failed) return
      failed = true
      if (this.#client === client) this.#client = undefined
      clearInterval(heartbeat)
      client.removeAllListeners('notification')
      client.end().catch(() => undefined)
      if (this.#closed) return
      this.feed.setTrusted(false)
      this.options.onError(error)
      this.#timer = setTimeout(() => void this.#connect(), this.#retryMs)
      this.#timer.unref()
      this.#retryMs = Math.min(this.#retryMs * 2, LISTENER_RETRY_MAX_MS)
    }
    client.on('error', fail)
    client.on('end', () => fail(new Error('rights listener connection ended')))
    client.on('notification', (message) => {
      if (message.channel === this.options.channel) this.feed.notified(message.payload ?? '')
    })
    try {
      await client.connect()
      // Bounded: a LISTEN left unanswered would leave the node untrusted, and never retried.
      await this.#answered(client, `LISTEN "${this.options.channel}"`)
    } catch (error) {
      fail(error as Error)
      return
    }
    if (failed || this.#closed) return
    this.#retryMs = LISTENER_RETRY_MIN_MS
    this.feed.setTrusted(true)
    heartbeat = this.#beat(client, fail)
    this.#heartbeat = heartbeat
  }

  /** Every LISTENER_HEARTBEAT_MS a round trip on the listening connection, bounded in time. */
  #beat(client: pg.Client, fail: (error: Error) => void): NodeJS.Timeout {
    let pending = false
    const timer = setInterval(() => {
      if (pending) return
      pending = true
      this.#answered(client, 'select 1')
        .catch((error: Error) => fail(error))
        .finally(() => {
          pending = false
        })
    }, LISTENER_HEARTBEAT_MS)
    timer.unref()
    return timer
  }

  /** The statement's answer, or a rejection once the connect timeout has passed without one. */
  async #answered(client: pg.Client, text: string): Promise<void> {
    let deadline: NodeJS.Timeout | undefined
    const late = new Promise<never>((_, reject) => {
      deadline = setTimeout(
        () => reject(new Error('rights listener connection stopped answering')),
        this.options.connectTimeoutMs,
      )
    })
    try {
      await Promise.race([client.query(text), late])
    } finally {
      clearTimeout(deadline)
    }
  }
}
