import type { TrustProxy } from '../config.js'

/**
 * Fastify's form of a TrustProxy, never `true` (which would believe the leftmost X-Forwarded-For
 * entry, written by the client itself). Fastify 5 deliberately ignores a bare hop count, so n hops
 * become proxy-addr's trust function: the socket peer and the next n − 1 entries are proxies.
 * Both listeners use it, so the consent API's limits key on the same address as the main API's.
 */
export function fastifyTrustProxy(
  trust: TrustProxy | undefined,
): false | string[] | ((address: string, hop: number) => boolean) {
  if (trust === undefined || trust === false || trust === 0) return false
  if (typeof trust === 'number') return (_address, hop) => hop < trust
  return [...trust]
}
