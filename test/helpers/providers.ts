import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { ProviderConfig } from '../../src/config.js'
import { imitateSendGrid, imitateTwilio, type Reply } from './provider-imitations.js'

/**
 * A local stand-in for SendGrid's and Twilio's APIs on 127.0.0.1: a real HTTP server that
 * imitates the endpoints Coffer calls closely enough to refuse what the real ones would (bad
 * credentials, missing fields, wrong content type), answers as they do, and records every
 * request byte for byte so tests can assert exactly what Coffer sent.
 *
 *   SendGrid: POST {url}/sendgrid/v3/mail/send, `Authorization: Bearer <key>`, JSON body;
 *             202, empty body, `X-Message-Id`.
 *   Twilio:   POST {url}/twilio/2010-04-01/Accounts/{sid}/Messages.json, Basic auth with the
 *             account SID + auth token or an API key SID + secret, urlencoded body; 201 + JSON.
 *
 * Tests script failures with `answerNext` (a status and body, a delay longer than Coffer's
 * timeout, or a dropped connection).
 */

export type ProviderKind = 'sendgrid' | 'twilio'

export interface RecordedRequest {
  provider: ProviderKind | 'unknown'
  method: string
  /** Path below the provider's base URL (`/v3/mail/send`), without the query. */
  path: string
  query: string
  /** Header names lowercased; repeated headers joined with ", ". */
  headers: Record<string, string>
  raw: string
  /** The body parsed as JSON, when it was sent as JSON. */
  json?: unknown
  /** The body parsed as a form, when urlencoded: each field with all its values in order. */
  form?: Record<string, string[]>
  /** What the stand-in answered (absent when it dropped the connection). */
  reply?: { status: number; headers: Record<string, string>; body: string }
}

export interface ScriptedAnswer {
  status?: number
  /** An object is sent as JSON. */
  body?: string | object
  headers?: Record<string, string>
  /** Wait this long before answering (timeouts); cut short when the stand-in closes. */
  delayMs?: number
  /** Drop the connection without any answer. */
  hangUp?: boolean
  /** Answer from what was sent (e.g. an error quoting the recipient); overrides status and body. */
  replyFrom?: (req: RecordedRequest) => Reply
}

export interface TwilioAccount {
  authToken: string
  /** API key SID → secret. */
  apiKeys: Map<string, string>
}

export interface ProviderStandIn {
  /** `http://127.0.0.1:PORT` */
  url: string
  /** Base URLs to hand Coffer (`providers` of buildTestApp / createDeps). */
  config(timeoutMs?: number): ProviderConfig
  /** Every request received, oldest first. */
  requests: RecordedRequest[]
  requestsTo(provider: ProviderKind): RecordedRequest[]
  /** SendGrid API keys the stand-in accepts. */
  sendgridKeys: Set<string>
  /** Twilio accounts by account SID. */
  twilioAccounts: Map<string, TwilioAccount>
  /** Answer the next request to this provider with `answer` instead of imitating it. */
  answerNext(provider: ProviderKind, answer: ScriptedAnswer): void
  /** Forget recorded requests and scripted answers (keys and accounts stay). */
  reset(): void
  close(): Promise<void>
}

/** Credentials the stand-in accepts out of the box (tests may add more). */
export const TEST_SENDGRID_KEY = `SG.${randomBytes(16).toString('base64url')}.${randomBytes(32).toString('base64url')}`
export const TEST_TWILIO = {
  accountSid: `AC${randomBytes(16).toString('hex')}`,
  authToken: randomBytes(16).toString('hex'),
  keySid: `SK${randomBytes(16).toString('hex')}`,
  keySecret: randomBytes(24).toString('base64url'),
}

const SENDGRID_PREFIX = '/sendgrid'
const TWILIO_PREFIX = '/twilio'

function record(req: IncomingMessage, raw: string): RecordedRequest {
  const url = new URL(req.url ?? '/', 'http://stand-in')
  const provider = url.pathname.startsWith(`${SENDGRID_PREFIX}/`)
    ? 'sendgrid'
    : url.pathname.startsWith(`${TWILIO_PREFIX}/`)
      ? 'twilio'
      : 'unknown'
  const prefix =
    provider === 'sendgrid' ? SENDGRID_PREFIX : provider === 'twilio' ? TWILIO_PREFIX : ''
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value
  }
  const recorded: RecordedRequest = {
    provider,
    method: req.method ?? '',
    path: url.pathname.slice(prefix.length),
    query: url.search,
    headers,
    raw,
  }
  const type = headers['content-type'] ?? ''
  if (type.startsWith('application/json')) {
    try {
      recorded.json = JSON.parse(raw)
    } catch {
      // Left unparsed: the imitation answers 400.
    }
  } else if (type.startsWith('application/x-www-form-urlencoded')) {
    const form: Record<string, string[]> = {}
    for (const [k, v] of new URLSearchParams(raw)) {
      const values = form[k] ?? []
      values.push(v)
      form[k] = values
    }
    recorded.form = form
  }
  return recorded
}

function send(res: ServerResponse, reply: Reply, recorded: RecordedRequest): void {
  const body =
    reply.body === undefined
      ? ''
      : typeof reply.body === 'string'
        ? reply.body
        : JSON.stringify(reply.body)
  const headers: Record<string, string> = { ...(reply.headers ?? {}) }
  if (body !== '' && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
    headers['content-type'] = typeof reply.body === 'string' ? 'text/plain' : 'application/json'
  recorded.reply = { status: reply.status, headers, body }
  res.writeHead(reply.status, headers)
  res.end(body)
}

function scriptedReply(answer: ScriptedAnswer): Reply {
  return {
    status: answer.status ?? 200,
    ...(answer.body !== undefined ? { body: answer.body } : {}),
    ...(answer.headers ? { headers: answer.headers } : {}),
  }
}

export async function startProviderStandIn(): Promise<ProviderStandIn> {
  const requests: RecordedRequest[] = []
  const scripted: Record<ProviderKind, ScriptedAnswer[]> = { sendgrid: [], twilio: [] }
  const sendgridKeys = new Set([TEST_SENDGRID_KEY])
  const twilioAccounts = new Map<string, TwilioAccount>([
    [
      TEST_TWILIO.accountSid,
      {
        authToken: TEST_TWILIO.authToken,
        apiKeys: new Map([[TEST_TWILIO.keySid, TEST_TWILIO.keySecret]]),
      },
    ],
  ])
  const timers = new Set<NodeJS.Timeout>()

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const recorded = record(req, Buffer.concat(chunks).toString('utf8'))
      requests.push(recorded)
      const answer =
        recorded.provider === 'unknown' ? undefined : scripted[recorded.provider].shift()
      if (answer?.hangUp) {
        req.socket.destroy()
        return
      }
      const reply = answer?.replyFrom
        ? answer.replyFrom(recorded)
        : answer
          ? scriptedReply(answer)
          : recorded.provider === 'sendgrid'
            ? imitateSendGrid(recorded, sendgridKeys)
            : recorded.provider === 'twilio'
              ? imitateTwilio(recorded, twilioAccounts)
              : { status: 404, body: 'no such provider' }
      if (!answer?.delayMs) {
        send(res, reply, recorded)
        return
      }
      const timer = setTimeout(() => {
        timers.delete(timer)
        if (!res.destroyed) send(res, reply, recorded)
      }, answer.delayMs)
      timers.add(timer)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const url = `http://127.0.0.1:${port}`

  return {
    url,
    config: (timeoutMs = 5000) => ({
      sendgridBaseUrl: `${url}${SENDGRID_PREFIX}`,
      twilioBaseUrl: `${url}${TWILIO_PREFIX}`,
      timeoutMs,
    }),
    requests,
    requestsTo: (provider) => requests.filter((r) => r.provider === provider),
    sendgridKeys,
    twilioAccounts,
    answerNext: (provider, answer) => {
      scripted[provider].push(answer)
    },
    reset: () => {
      requests.length = 0
      scripted.sendgrid.length = 0
      scripted.twilio.length = 0
    },
    close: async () => {
      for (const t of timers) clearTimeout(t)
      timers.clear()
      server.closeAllConnections()
      await new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())))
    },
  }
}
