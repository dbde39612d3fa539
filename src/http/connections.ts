import type { Server } from 'node:http'
import type { Http2ServerRequest } from 'node:http2'
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

/**
 * What a listener does with a request's connection, on HTTP/1.1 and on HTTP/2 (a TLS listener
 * serves both, chosen by ALPN: http/tls-server.ts). `Connection` is a hop-by-hop header HTTP/2
 * forbids (RFC 9113 §8.2.2): Node drops it with a warning, so it is only ever set on HTTP/1.
 */

export function isHttp2(request: FastifyRequest): boolean {
  return request.raw.httpVersionMajor >= 2
}

/**
 * `Connection: close` on an HTTP/1 answer (this connection carries nothing after it). Nothing on
 * HTTP/2: its streams are independent, and a stream's unread body is reset with the stream.
 */
export function closeHttp1Connection(request: FastifyRequest, reply: FastifyReply): void {
  if (!isHttp2(request)) reply.header('connection', 'close')
}

/**
 * Drops a `Connection` header from every HTTP/2 answer of a TLS listener: Fastify sets
 * `Connection: close` itself when a body parser fails (a malformed JSON body, one over the
 * limit), whatever the protocol, and Node would drop it with an UnsupportedWarning on stderr.
 */
export function dropConnectionHeaderOnHttp2(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (isHttp2(request) && reply.hasHeader('connection')) reply.removeHeader('connection')
    done(null, payload)
  })
}

/**
 * Asks the client to take its next request elsewhere (shutdown drain): on HTTP/1
 * `Connection: close`; on HTTP/2 a GOAWAY, by closing the session gracefully: the streams
 * already open (this one included) finish, no new one is accepted.
 */
export function askToReconnect(request: FastifyRequest, reply: FastifyReply): void {
  if (!isHttp2(request)) {
    reply.header('connection', 'close')
    return
  }
  const session = (request.raw as unknown as Http2ServerRequest).stream?.session
  if (session && !session.closed && !session.destroyed) session.close()
}

/** True when the client is gone: its HTTP/1 socket, or its HTTP/2 stream, is closed. */
export function clientGoneAlready(request: FastifyRequest): boolean {
  if (isHttp2(request)) {
    const stream = (request.raw as unknown as Http2ServerRequest).stream
    return !stream || stream.destroyed || stream.closed
  }
  return request.raw.socket?.destroyed === true
}

/** Every open socket of a TLS listener (http/tls-server.ts); HTTP servers track their own. */
const trackedSockets = new WeakMap<object, Set<Socket>>()

export function trackSockets(server: {
  on(event: 'connection', fn: (s: Socket) => void): unknown
}) {
  const sockets = new Set<Socket>()
  trackedSockets.set(server, sockets)
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
}

/**
 * Cuts every connection of a listener, busy or not (the end of the shutdown grace period). An
 * HTTP server has `closeAllConnections`; an HTTP/2 server has none, so its sockets are tracked.
 */
export function cutAllConnections(server: Server | object): void {
  const tracked = trackedSockets.get(server)
  if (tracked) {
    for (const socket of tracked) socket.destroy()
    return
  }
  ;(server as Server).closeAllConnections()
}
