import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

export interface HstsOptions {
  /** `Strict-Transport-Security: max-age=<n>` (COFFER_HSTS_MAX_AGE_SECONDS). */
  maxAgeSeconds: number
  /** Every connection of this listener is TLS (native TLS): every answer carries it. */
  tls: boolean
}

/** Per listener (its server object, shared by every plugin scope of the app). */
const byServer = new WeakMap<object, { value: string; tls: boolean }>()

/**
 * HSTS (issue 19): browsers that saw it over HTTPS never reach this host in clear again for
 * max-age. Sent on every answer over TLS: natively (the whole listener), or through a proxy
 * COFFER_TRUST_PROXY trusts that says `X-Forwarded-Proto: https` (Fastify's `request.protocol`
 * believes that header only from a trusted peer, and only its last entry, the proxy's own).
 * Never on plain HTTP from anyone else: a browser ignores it there (RFC 6797 §8.1), and it
 * would claim what is not true. No `includeSubDomains`: Coffer does not own its domain's other
 * hosts. An onSend hook, so error answers (a refused credential, a 404, the shutdown's 503)
 * carry it too; the error senders also call setHsts for the router's own errors, which are
 * answered before any hook.
 */
export function addHsts(app: FastifyInstance, options: HstsOptions): void {
  byServer.set(app.server, { value: `max-age=${options.maxAgeSeconds}`, tls: options.tls })
  app.addHook('onSend', (request, reply, payload, done) => {
    setHsts(request, reply)
    done(null, payload)
  })
}

export function setHsts(request: FastifyRequest, reply: FastifyReply): void {
  const hsts = byServer.get(request.server.server)
  if (hsts && (hsts.tls || request.protocol === 'https'))
    reply.header('strict-transport-security', hsts.value)
}
