import {
  createSecureServer,
  type Http2SecureServer,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
  type SecureServerOptions,
} from 'node:http2'
import type { TLSSocket } from 'node:tls'
import type { FastifyInstance } from 'fastify'
import { dropConnectionHeaderOnHttp2, trackSockets } from './connections.js'
import { secureContextOptions, type TlsMaterial } from './tls-material.js'

/**
 * A TLS listener (issue 19): an HTTP/2 server with HTTP/1.1 beside it, the protocol chosen by
 * ALPN (`h2`, else `http/1.1`: the official SDK, curl and every HTTP/1 client keep working).
 * Both listeners use it when given a pair.
 */

type TlsServerOptions = SecureServerOptions & { allowHTTP1: true }

/** What Fastify passes a server factory: its options, defaults applied. */
interface FastifyServerOptions {
  http2SessionTimeout?: number
  connectionTimeout?: number
  keepAliveTimeout?: number
  requestTimeout?: number
}

type Handler = (req: Http2ServerRequest, res: Http2ServerResponse) => void

/** Each TLS server's open HTTP/2 sessions: closed gracefully when its app closes. */
const sessionsOf = new WeakMap<object, Set<Http2Session>>()

/** Streams one HTTP/2 connection may have open at once (nginx: 128). */
export const MAX_CONCURRENT_STREAMS = 100

/**
 * The Fastify options that make an app a TLS listener. The server comes from our factory, so
 * it is the app's only one: given `localhost`, Fastify binds every address the name resolves
 * to (127.0.0.1 and ::1) with servers of its own making, which no reload, no socket tracking
 * and no client-certificate check would reach (an old certificate served on ::1 for ever);
 * with a factory it binds the name's first address only, as the listen check and the
 * production rule (transport-guard.ts) assume.
 */
export function fastifyTlsOptions(material: TlsMaterial): {
  http2: true
  https: TlsServerOptions
  serverFactory: (handler: Handler, options: FastifyServerOptions) => Http2SecureServer
} {
  const https: TlsServerOptions = {
    allowHTTP1: true,
    ...secureContextOptions(material),
    // Asked for only with a client CA; `optional` lets a client without one in, and
    // refuseUnverifiedCertificate turns away one that presents a bad one.
    requestCert: material.clientAuth !== undefined,
    rejectUnauthorized: material.clientAuth === 'require',
    // An explicit bound on the streams one HTTP/2 connection may have open at once (Node's
    // default is unbounded, limited only by maxSessionMemory): RFC 9113's recommended minimum.
    settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS },
  }
  return {
    http2: true,
    https,
    serverFactory: (handler, options) => createTlsServer(https, handler, options, material),
  }
}

/**
 * The server, with what Fastify gives the HTTP/2 servers it makes (an idle session closes after
 * `http2SessionTimeout`, the connection timeout) and what it does not: HTTP/1 connections get
 * the keep-alive and request timeouts a plain listener has (Node's own would cut a slow BLOB
 * upload at 5 minutes, before its deadline); every socket is tracked so the shutdown can cut
 * them (http/connections.ts), and every session so the app's close can end it (GOAWAY).
 */
function createTlsServer(
  https: TlsServerOptions,
  handler: Handler,
  options: FastifyServerOptions,
  material: TlsMaterial,
): Http2SecureServer {
  const server = createSecureServer(https, handler) as Http2SecureServer & {
    keepAliveTimeout: number
    requestTimeout: number
  }
  const sessionTimeout = options.http2SessionTimeout ?? 72_000
  server.setTimeout(options.connectionTimeout ?? 0)
  server.keepAliveTimeout = options.keepAliveTimeout ?? 72_000
  server.requestTimeout = options.requestTimeout ?? 0
  trackSockets(server)
  const sessions = new Set<Http2Session>()
  sessionsOf.set(server, sessions)
  server.on('session', (session) => {
    session.setTimeout(sessionTimeout, () => session.close())
    sessions.add(session)
    session.once('close', () => sessions.delete(session))
  })
  if (material.clientAuth === 'optional') server.on('secureConnection', refuseUnverifiedCertificate)
  return server
}

/**
 * Once the app exists: its HTTP/2 sessions are closed gracefully (GOAWAY) when it closes, so
 * `close()` does not wait for idle clients (Node 20 leaves them open); no HTTP/2 answer carries
 * a `Connection` header.
 */
export function prepareTlsServer(app: FastifyInstance): void {
  dropConnectionHeaderOnHttp2(app)
  app.addHook('preClose', (done) => {
    for (const session of sessionsOf.get(app.server) ?? [])
      if (!session.closed && !session.destroyed) session.close()
    done()
  })
}

/**
 * `optional` client certificates: no certificate is fine, but one that does not verify against
 * the client CA (foreign, expired) is refused, as with `require` (nginx's `optional` does the
 * same). Runs right after the handshake, before a byte of a request is read.
 */
function refuseUnverifiedCertificate(socket: TLSSocket): void {
  const peer = socket.getPeerCertificate()
  const presented = peer !== null && typeof peer === 'object' && Object.keys(peer).length > 0
  if (presented && !socket.authorized) socket.destroy()
}
