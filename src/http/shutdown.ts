import closeWithGrace from 'close-with-grace'
import type { FastifyInstance } from 'fastify'
import { AppError, ErrorType } from '../lib/errors.js'
import { askToReconnect, cutAllConnections } from './connections.js'

/**
 * The node's shutdown state, kept by the health service (modules/health; `/readyz` reports it)
 * and handed over by the composition root: a port, so this glue knows no feature.
 */
export interface ShutdownState {
  /** True from the signal on: answers carry `Connection: close`. */
  readonly draining: boolean
  /** True once the listeners close: requests are refused. */
  readonly closing: boolean
  startDraining(): void
  startClosing(): void
}

/** A client refused during shutdown may retry at once: another node (or this one restarted) answers. */
const SHUTDOWN_RETRY_SECONDS = 1

/** Time allowed to close the database pool once the listeners are closed or cut. */
const POOL_CLOSE_MARGIN_MS = 5000

export function shuttingDown(): AppError {
  return new AppError(
    503,
    ErrorType.unavailable,
    'SHUTTING_DOWN',
    'The server is shutting down; retry the request',
    { retryAfterSeconds: SHUTDOWN_RETRY_SECONDS },
  )
}

/**
 * During the drain delay (not ready, still accepting) requests are served, but each answer
 * carries `Connection: close` (on HTTP/2, where that header is forbidden, the session is sent a
 * GOAWAY instead: http/connections.ts): a client on a keep-alive connection reconnects, through
 * the balancer, to a node that stays. Once the listeners close, a request that still reaches the
 * app (pipelined, or sent on a keep-alive connection that was busy when the listener closed) is
 * refused through the app's error handler, so in its own error body, with `Connection: close`.
 * Probes still answer (`/readyz` names `shutting_down`). Register it before any hook that does
 * work.
 */
export function addShutdownGate(app: FastifyInstance, health: ShutdownState): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (!health.draining || request.routeOptions.config.probe) {
      done()
      return
    }
    askToReconnect(request, reply)
    done(health.closing ? shuttingDown() : undefined)
  })
}

export interface ShutdownOptions {
  apps: FastifyInstance[]
  health: ShutdownState
  /** Closes the database pool (Store.close), after every listener is closed. */
  closeStore: () => Promise<void>
  /**
   * How long the listeners keep accepting after the signal while `/readyz` answers 503, so a
   * balancer takes the node out before it refuses connections (COFFER_SHUTDOWN_DELAY_MS).
   */
  delayMs: number
  /** How long in-flight requests may run once the listeners close (COFFER_SHUTDOWN_GRACE_MS). */
  graceMs: number
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void }
  /**
   * Signals that do not stop the process because something else handles them (SIGHUP: the
   * certificate reload, http/tls-reload.ts, when a listener serves TLS).
   */
  handledElsewhere?: readonly 'SIGHUP'[]
  /** Called first when shutting down (stops the certificate watchers). */
  onShutdown?: () => void
}

/**
 * `coffer serve` on SIGTERM/SIGINT (close-with-grace): `/readyz` turns 503 at once; for
 * `delayMs` the listeners still accept and serve (the balancer's probes notice meanwhile); then
 * they stop accepting connections and in-flight requests finish; whatever still runs after
 * `graceMs` has its connection cut. Then the pool closes and the process exits 0. A second
 * signal, or a close that hangs past delay, grace and a margin, exits 1 at once. After an
 * uncaught error there is no delay: a process in an unknown state should not take new work.
 */
export function closeOnSignals(options: ShutdownOptions): void {
  const { apps, health, graceMs, log } = options
  closeWithGrace(
    {
      delay: options.delayMs + graceMs + POOL_CLOSE_MARGIN_MS,
      logger: { error: (message: unknown) => log.warn({}, String(message)) },
      ...(options.handledElsewhere?.length ? { skip: [...options.handledElsewhere] } : {}),
    },
    async ({ signal, err }) => {
      options.onShutdown?.()
      // close-with-grace skips these signals, and what handled them stops now: with no
      // listener left, SIGHUP's default action would kill the process mid-drain (a certbot
      // deploy hook during a rolling restart). Ignored, said so.
      for (const name of options.handledElsewhere ?? [])
        process.on(name, () => log.info({ signal: name }, `${name} ignored: shutting down`))
      health.startDraining()
      const delayMs = err ? 0 : options.delayMs
      if (err) log.warn({ err }, 'shutting down after an unhandled error')
      else log.info({ signal, delay_ms: delayMs, grace_ms: graceMs }, 'shutting down')
      // No timer at all without a delay: the listeners close in the same tick as the signal.
      if (delayMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, delayMs))
        log.info({ delay_ms: delayMs }, 'drain delay over: closing the listeners')
      }
      health.startClosing()
      const closed = Promise.all(apps.map((app) => app.close()))
      let timer: NodeJS.Timeout | undefined
      const graceOver = new Promise<'cut'>((resolve) => {
        timer = setTimeout(() => resolve('cut'), graceMs)
      })
      if ((await Promise.race([closed, graceOver])) === 'cut') {
        log.warn({ grace_ms: graceMs }, 'requests still running after the grace period: cut')
        for (const app of apps) cutAllConnections(app.server)
        await closed
      }
      clearTimeout(timer)
      await options.closeStore()
    },
  )
}
