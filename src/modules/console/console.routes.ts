import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ConsoleAssets } from './console.assets.js'

/**
 * The console's pages carry a strict policy: its own scripts, styles and API only (same origin),
 * no inline code, never framed. The API's own answers are untouched: these headers are set by
 * the console's handler, not by a hook.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ')

const IMMUTABLE = 'public, max-age=31536000, immutable'

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Coffer console not built</title></head>
<body><h1>The Coffer console is not built</h1>
<p>This server has no console build in <code>dist/console</code>. Run <code>npm run build:console</code>
(<code>npm ci</code> runs it) and restart the server.</p></body></html>
`

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
}

/**
 * `GET /console` and everything below it, in a plugin of its own so that nothing here reaches
 * the API's routes: hashed assets cached for ever, any other path answered with index.html (the
 * console routes on the client), a missing hashed asset 404. Public: the console holds no secret,
 * the signed-in user's token lives in the browser's session only.
 */
export async function consoleRoutes(
  app: FastifyInstance,
  assets: ConsoleAssets | null,
): Promise<void> {
  await app.register((scope, _options, done) => {
    const config = { operation: 'console.asset', access: { public: true } } as const
    const options = { config, schema: { hide: true }, logLevel: 'warn' } as const
    const serve = async (
      request: FastifyRequest<{ Params: { '*'?: string } }>,
      reply: FastifyReply,
    ) => {
      secure(reply)
      if (!assets) {
        return reply
          .code(503)
          .header('cache-control', 'no-store')
          .type('text/html; charset=utf-8')
          .send(NOT_BUILT)
      }
      const path = request.params['*'] ?? ''
      const file = assets.files.get(path)
      if (file && path !== 'index.html') {
        return reply
          .header('cache-control', file.immutable ? IMMUTABLE : 'no-cache')
          .type(file.type)
          .send(file.body)
      }
      if (path.startsWith('assets/')) {
        return reply
          .code(404)
          .header('cache-control', 'no-store')
          .type('text/plain; charset=utf-8')
          .send('Not found')
      }
      return reply
        .header('cache-control', 'no-cache')
        .type('text/html; charset=utf-8')
        .send(assets.index)
    }
    scope.get('/console', options, serve)
    scope.get('/console/*', options, serve)
    done()
  })
}
