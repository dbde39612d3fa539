import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { clientNetwork } from '../../lib/client-network.js'
import { consentErrors } from './consent-errors.js'
import { parseQuery } from './signature.js'
import { partitionClaim } from './token.js'

/** Requests per window allowed to one client address and to one shop (each node counts its own). */
export interface ConsentRateLimits {
  perAddress: number
  perShop: number
  windowSeconds: number
}

export const DEFAULT_CONSENT_RATE_LIMITS: ConsentRateLimits = {
  perAddress: 120,
  perShop: 6000,
  windowSeconds: 60,
}

/** Longer texts are not a valid shop (100 characters) and only need some key. */
const MAX_SHOP_KEY = 100

/**
 * The counter of a client address: its network as the login limits count it (an IPv6 client by
 * its /64, lib/client-network.ts). A request whose socket is already gone has no address:
 * counted together rather than failing.
 */
export function addressKey(ip: string | undefined): string {
  return ip === undefined || ip === '' ? '' : clientNetwork(ip)
}

/**
 * The shop a request is counted against: the `shop` query parameter, else (a POST sent
 * directly) the partition its token names. The token is not verified here, so a caller can
 * only spend a shop's budget as it could with a GET naming that shop.
 */
function shopOf(request: FastifyRequest): string {
  const url = request.raw.url ?? ''
  const mark = url.indexOf('?')
  const shop = mark < 0 ? undefined : parseQuery(url.slice(mark + 1)).find(([k]) => k === 'shop')
  if (shop) return shop[1].slice(0, MAX_SHOP_KEY)
  const jwt = (request.body as { jwt?: unknown } | undefined)?.jwt
  return (typeof jwt === 'string' ? partitionClaim(jwt) : undefined)?.slice(0, MAX_SHOP_KEY) ?? ''
}

/**
 * Flood limits of the consent API (every GET of a new consumer writes a record): per client
 * address (`request.ip`, see addressKey) from the first byte, and per shop once the body
 * is parsed. Beyond either: 429 `{"error": …}` with `Retry-After` in seconds. Counters live in
 * this process (fixed windows), enough to stop a flood; a cluster of n nodes allows n times
 * the limits. Each limiter tracks the 5,000 most recently seen keys (the plugin's LRU), so
 * memory stays bounded whatever the keys.
 */
export async function addConsentRateLimits(
  app: FastifyInstance,
  limits: ConsentRateLimits,
): Promise<void> {
  await app.register(rateLimit, { global: false })
  const timeWindow = limits.windowSeconds * 1000
  const perAddress = app.createRateLimit({
    max: limits.perAddress,
    timeWindow,
    keyGenerator: (request) => addressKey(request.ip),
  })
  const perShop = app.createRateLimit({
    max: limits.perShop,
    timeWindow,
    keyGenerator: shopOf,
  })
  const check =
    (limiter: typeof perAddress) => async (request: FastifyRequest, reply: FastifyReply) => {
      // A balancer's probes (modules/health) are cheap and must never be refused as a flood.
      if (request.routeOptions.config.probe) return
      const state = await limiter(request)
      if (!state.isAllowed && state.isExceeded) {
        reply.header('retry-after', String(Math.max(1, state.ttlInSeconds)))
        throw consentErrors.tooManyRequests()
      }
    }
  app.addHook('onRequest', check(perAddress))
  app.addHook('preHandler', check(perShop))
}
