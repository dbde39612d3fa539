/**
 * One HTTP call to a messaging provider: bounded in time (connect to last byte) and in the size
 * of the answer read, never following redirects (the Authorization header stays with the
 * configured host), and failing with a ProviderError whose detail never holds a secret we sent.
 */

export type ProviderName = 'SendGrid' | 'Twilio'

/**
 * Why a provider call failed:
 * - `rejected`: the provider answered with a status outside 2xx (`status` is set);
 * - `bad_response`: a 2xx without the message id it must carry (the message may have been sent);
 * - `timeout`: no complete answer within the configured time;
 * - `unreachable`: no answer at all (DNS, connection refused or reset, TLS).
 */
export type ProviderFailure = 'rejected' | 'bad_response' | 'timeout' | 'unreachable'

export class ProviderError extends Error {
  constructor(
    readonly provider: ProviderName,
    readonly failure: ProviderFailure,
    /** The provider's own error: its JSON body when it sent one, else `{body: <text>}`. */
    readonly detail: Record<string, unknown>,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(`${provider} request failed (${failure}${status ? ` ${status}` : ''})`, options)
    this.name = 'ProviderError'
  }
}

export interface ProviderAnswer {
  status: number
  headers: Headers
  /** The body as text, at most MAX_ANSWER_BYTES of it, secrets already masked. */
  text: string
}

/** What we keep of an answer: error bodies are small; anything longer is cut. */
export const MAX_ANSWER_BYTES = 64 * 1024
/** Text of a non-JSON error body shown to the caller. */
const MAX_SHOWN_TEXT = 1000

async function readLimited(response: Response): Promise<string> {
  if (!response.body) return ''
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    const room = MAX_ANSWER_BYTES - size
    chunks.push(value.byteLength > room ? value.subarray(0, room) : value)
    size += Math.min(value.byteLength, room)
    if (size >= MAX_ANSWER_BYTES) {
      await reader.cancel().catch(() => undefined)
      break
    }
  }
  return Buffer.concat(chunks).toString('utf8')
}

/** Replaces every secret we sent with `[redacted]`, should a provider ever echo one. */
function mask(text: string, secrets: readonly string[]): string {
  let out = text
  for (const secret of secrets) {
    if (secret.length >= 4) out = out.split(secret).join('[redacted]')
  }
  return out
}

/** The provider's error as an object: its JSON object, or the (shortened) text it sent. */
export function errorDetail(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      return parsed as Record<string, unknown>
    }
  } catch {
    // Not JSON: shown as text below.
  }
  return { body: text.length > MAX_SHOWN_TEXT ? `${text.slice(0, MAX_SHOWN_TEXT)}…` : text }
}

export interface ProviderCall {
  provider: ProviderName
  url: string
  init: { method: 'POST'; headers: Record<string, string>; body: string }
  timeoutMs: number
  /** Everything secret in the request (keys, tokens, Basic pairs): masked in any answer. */
  secrets: readonly string[]
}

/** Sends the request; a 2xx resolves, anything else throws a ProviderError. */
export async function callProvider(call: ProviderCall): Promise<ProviderAnswer> {
  const signal = AbortSignal.timeout(call.timeoutMs)
  let answer: ProviderAnswer
  try {
    const response = await fetch(call.url, { ...call.init, signal, redirect: 'manual' })
    answer = {
      status: response.status,
      headers: response.headers,
      text: mask(await readLimited(response), call.secrets),
    }
  } catch (e) {
    if (signal.aborted) {
      throw new ProviderError(call.provider, 'timeout', {
        message: `${call.provider} did not answer within ${call.timeoutMs} ms`,
      })
    }
    // The cause (e.g. ECONNREFUSED) is logged with a 5xx, never sent: it names our network.
    throw new ProviderError(
      call.provider,
      'unreachable',
      { message: `${call.provider} could not be reached` },
      undefined,
      { cause: e },
    )
  }
  if (answer.status < 200 || answer.status > 299) {
    throw new ProviderError(call.provider, 'rejected', errorDetail(answer.text), answer.status)
  }
  return answer
}
