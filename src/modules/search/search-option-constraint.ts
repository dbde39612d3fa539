import type { IncomingMessage } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { hasBody, isUrlencoded } from '../../http/bodyless-form.js'

type Strategy = Parameters<FastifyInstance['addConstraintStrategy']>[0]
type Handler = Parameters<ReturnType<Strategy['storage']>['set']>[1]

/** The value a request carrying a search option derives; legacy search routes require it. */
export const CARRIES_SEARCH_OPTION = 'present'

const LEGACY_PREFIX = '/v1/vaults/'

function queryNames(url: string): string[] {
  const at = url.indexOf('?')
  if (at < 0) return []
  return [...new URLSearchParams(url.slice(at + 1)).keys()].map((name) => name.trim())
}

/** `/v1/vaults/{id}` or `/v1/vaults/{id}/`: the only paths with a legacy search. */
function isVaultPath(url: string): boolean {
  if (!url.startsWith(LEGACY_PREFIX)) return false
  const end = url.indexOf('?')
  const slash = url.indexOf('/', LEGACY_PREFIX.length)
  return slash < 0 || (end < 0 ? slash === url.length - 1 : slash === end - 1 || slash > end)
}

/** `CARRIES_SEARCH_OPTION`, or nothing: the router then matches only unconstrained routes. */
function derive(req: IncomingMessage): string | undefined {
  // Checked on every request: return early, and parse a query only on a vault's own path.
  if (req.method !== 'GET' || req.url === undefined || !isVaultPath(req.url)) return undefined
  if (queryNames(req.url).includes('search_option')) return CARRIES_SEARCH_OPTION
  return isUrlencoded(req) && hasBody(req) ? CARRIES_SEARCH_OPTION : undefined
}

/**
 * Legacy TrueVault clients search with `GET /v1/vaults/{id}[/]?search_option=…` (or the option as
 * a urlencoded body on that GET), a path whose plain GET reads the vault. The router must choose
 * before the body is read, so this routing constraint marks a GET as a search when its query
 * names `search_option` or it carries a urlencoded body (a vault read has no use for one); every
 * other request keeps its route. It runs on every request, so it is cheap for all other paths.
 */
export const searchOptionConstraint: Strategy = {
  name: 'searchOption',
  storage() {
    const handlers = new Map<unknown, Handler>()
    return {
      get: (value) => handlers.get(value) ?? null,
      set: (value, handler) => {
        handlers.set(value, handler)
      },
    }
  },
  // find-my-way's type says string; undefined is its "not derived" (no constrained route).
  deriveConstraint: derive as Strategy['deriveConstraint'],
  mustMatchWhenDerived: false,
}
