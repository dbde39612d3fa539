import type { Http2SecureServer, Http2Session, SecureServerOptions } from 'node:http2'
import type { TLSSocket } from 'node:tls'
import type { FastifyInstance } from 'fastify'
import { trackSockets } from './connections.js'
import { secureContextOptions, type TlsMaterial } from './tls-material.js'

/**
 * A TLS listener (issue 19): Fastify's HTTP/2 server with HTTP/1.1 beside it, the protocol
 * chosen by ALPN (`h2`, else `http/1.1`: the official SDK, curl and every HTTP/1 client keep
 * working). Both listeners use it when given a pair.
 */

/** The Fastify options that make an app a TLS listener. */
export function fastifyTlsOptions(material: TlsMaterial): {
  http2: true
  https: SecureServerOptions & { allowHTTP1: true }
} {
  return {
    http2: true,
    https: {
      allowHTTP1: true,
      ...secureContextOptions(material),
      // Asked for only with a client CA; `optional` lets a client without one in, and
      // refuseUnverifiedCertificate turns away one that presents a bad one.
      requestCert: material.clientAuth !== undefined,
      rejectUnauthorized: material.clientAuth === 'require',
    },
  }
}

/**
 * What Fastify does not do for an HTTP/2 server, done once it exists: its HTTP/1 connections get
 * the keep-alive and request timeouts a plain listener has (Node's own would cut a slow BLOB
 * upload at 5 minutes, before its deadline); HTTP/2 sessions are closed gracefully (GOAWAY)
 * when the app closes, so `close()` does not wait for idle clients (Node 20 leaves them open);
 * every socket is tracked so the shutdown can cut them (http/connections.ts).
 */
export function prepareTlsServer(app: FastifyInstance, material: TlsMaterial): void {
  const server = app.server as unknown as Http2SecureServer & {
    keepAliveTimeout: number
    requestTimeout: number
  }
  server.keepAliveTimeout = app.initialConfig.keepAliveTimeout ?? 72_000
  server.requestTimeout = (app.initialConfig as { requestTimeout?: number }).requestTimeout ?? 0
  trackSockets(server)
  const sessions = new Set<Http2Session>()
  server.on('session', (session) => {
    sessions.add(session)
    session.once('close', () => sessions.delete(session))
  })
  app.addHook('preClose', (done) => {
    for (const session of sessions) if (!session.closed && !session.destroyed) session.close()
    done()
  })
  if (material.clientAuth === 'optional') server.on('secureConnection', refuseUnverifiedCertificate)
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
