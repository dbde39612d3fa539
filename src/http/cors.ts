import cors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import { AppError, ErrorType } from '../lib/errors.js'
import { originMatcher } from '../lib/origins.js'

/**
 * CORS for one listener (decisions.md, CORS). Only listed origins are ever named in
 * `Access-Control-Allow-Origin` (never `*`, never an unlisted origin reflected), and never with
 * `Access-Control-Allow-Credentials`: Coffer's credential is an explicit `Authorization`
 * header, which a page sends without the browser's credentials mode, so the browser never adds
 * ambient credentials (cached Basic, cookies, client certificates) for another origin.
 */
export interface CorsPolicy {
  /** Validated origins (lib/origins.ts); empty: no CORS at all, as before. */
  origins: readonly string[]
  /** Access-Control-Max-Age: how long a browser may reuse a preflight answer. */
  maxAgeSeconds: number
  methods: readonly string[]
  /** Request headers a page may send beyond the CORS-safelisted ones. */
  allowedHeaders: readonly string[]
  /** Response headers a page may read beyond the CORS-safelisted ones. */
  exposedHeaders: readonly string[]
  /** The answer to a preflight from an origin not listed, in the listener's own error shape. */
  refusal: () => Error
}

/** The main API: what TrueVault clients send and read (the official SDK reads Content-Disposition). */
export const API_CORS = {
  methods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
  // Content-Disposition: raw BLOB uploads may name their file in it.
  allowedHeaders: ['Authorization', 'Content-Type', 'Content-Disposition'],
  exposedHeaders: ['Content-Disposition', 'Content-Type', 'Content-Length', 'Retry-After'],
  refusal: () =>
    new AppError(
      403,
      ErrorType.authorization,
      'ORIGIN_NOT_ALLOWED',
      'This origin is not allowed to call the API from a browser (COFFER_CORS_ORIGINS)',
    ),
} as const

/**
 * The consent API: public, no credentials; a JSON POST is what makes a browser preflight.
 * Its refusal is in the consent error shape, so consent-app.ts supplies it.
 */
export const CONSENT_CORS = {
  methods: ['GET', 'POST', 'OPTIONS'],
  allowedHeaders: ['Content-Type'],
  exposedHeaders: ['Content-Type', 'Content-Length', 'Retry-After'],
} as const

/**
 * Registers CORS on `app`. Call it after the hook that sets the security headers (a preflight
 * is answered from an `onRequest` hook and must carry them) and before authentication (a
 * preflight carries no credential; the actual request still needs one).
 */
export async function addCors(app: FastifyInstance, policy: CorsPolicy): Promise<void> {
  if (policy.origins.length === 0) return
  const allowed = originMatcher(policy.origins)
  // The plugin's `OPTIONS *` route only lets the router accept preflights; it serves nothing
  // else (an OPTIONS that is not an allowed preflight gets the app's 404 or the refusal below).
  app.addHook('onRoute', (route) => {
    if (route.method === 'OPTIONS' && route.url === '*') {
      route.config = { ...route.config, access: { public: true }, envelope: false }
    }
  })
  await app.register(cors, {
    // The listed origin itself, or false: no CORS header at all for anyone else. A function
    // (not the list) so `Vary: Origin` is sent on every answer, shared caches included.
    origin: (origin, callback) =>
      callback(null, origin !== undefined && allowed(origin) ? origin : false),
    methods: [...policy.methods],
    allowedHeaders: [...policy.allowedHeaders],
    exposedHeaders: [...policy.exposedHeaders],
    credentials: false,
    maxAge: policy.maxAgeSeconds,
    // An allowed origin's OPTIONS without Access-Control-Request-Method is answered like a
    // preflight, rather than with the plugin's text/plain 400 outside our error shapes.
    strictPreflight: false,
    hideOptionsRoute: true,
  })
  // A preflight from an unlisted origin: refused in the app's error shape (no CORS header, so
  // the browser blocks the call) instead of a 404 that would hide why.
  app.addHook('onRequest', (request, _reply, done) => {
    const origin = request.headers.origin
    const preflight =
      request.method === 'OPTIONS' &&
      origin !== undefined &&
      request.headers['access-control-request-method'] !== undefined
    if (preflight && !allowed(origin)) {
      done(policy.refusal())
      return
    }
    done()
  })
}
