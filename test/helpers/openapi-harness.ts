import type { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { ResponseContract } from './openapi-contract.js'

/**
 * Every response of a test app checked against the app's own `/openapi.json` (issue #17): the
 * document is a contract, so an answer it does not describe fails the test that caused it.
 */
export interface ResponseWatch {
  /** Responses checked so far. */
  readonly checked: number
  /** The mismatches found since the last call, now forgotten. */
  takeMismatches(): string[]
}

/** One compiled contract per distinct document: every test app of a run shares it. */
const contracts = new Map<string, ResponseContract>()

function contractOf(app: FastifyInstance): ResponseContract {
  const text = JSON.stringify(app.swagger())
  let contract = contracts.get(text)
  if (!contract) {
    contract = new ResponseContract(JSON.parse(text))
    contracts.set(text, contract)
  }
  return contract
}

/** Fastify's `/v1/users/:user_id` is OpenAPI's `/v1/users/{user_id}`. */
export const openapiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')

/**
 * Adds an `onSend` hook, last of them, so it sees the status, type and body as they leave. Call
 * before `app.ready()`. Streamed bodies (a BLOB download) are checked by status and type only.
 * Routes the document leaves out on purpose (`hide`: health probes, the document itself), HEAD
 * and OPTIONS (CORS preflights) and unrouted requests (404 with no route) are not operations.
 */
export function watchResponses(app: FastifyInstance): ResponseWatch {
  let contract: ResponseContract | undefined
  let mismatches: string[] = []
  let checked = 0
  app.addHook('onSend', (request, reply, payload, done) => {
    const url = request.routeOptions.url
    const schema = request.routeOptions.schema as { hide?: boolean } | undefined
    if (
      url === undefined ||
      schema?.hide ||
      request.method === 'HEAD' ||
      request.method === 'OPTIONS'
    ) {
      done(null, payload)
      return
    }
    contract ??= contractOf(app)
    const type = reply.getHeader('content-type')
    const body =
      payload === null || payload === undefined
        ? ''
        : typeof payload === 'string' || Buffer.isBuffer(payload)
          ? payload
          : undefined
    const mismatch = contract.check({
      method: request.method,
      path: openapiPath(url),
      status: reply.statusCode,
      contentType: typeof type === 'string' ? type : undefined,
      body: body as string | Buffer | undefined,
    })
    checked++
    if (mismatch) mismatches.push(mismatch)
    done(null, payload as Readable | string | Buffer | null)
  })
  return {
    get checked() {
      return checked
    },
    takeMismatches() {
      const taken = mismatches
      mismatches = []
      return taken
    },
  }
}

/** Throws the mismatches found so far, if any. */
export function assertDescribed(watch: ResponseWatch): void {
  const found = watch.takeMismatches()
  if (found.length > 0)
    throw new Error(`Response not described by /openapi.json (issue #17):\n${found.join('\n')}`)
}
