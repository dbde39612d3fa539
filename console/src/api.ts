import { session } from './session'

/** An API refusal as the envelope names it: `{error: {message, type, code}}`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
    this.name = 'ApiError'
  }
}

/** Codes that mean the session itself is gone (expired, logged out elsewhere). */
const SESSION_GONE = new Set(['UNAUTHENTICATED', 'INVALID_AUTHORIZATION'])

type Expired = (message: string) => void
let onExpired: Expired = () => {}

/** Told when a signed-in request answers that the credential is no longer valid. */
export function whenSessionExpires(handler: Expired): void {
  onExpired = handler
}

export function base64Json(value: unknown): string {
  const bytes = new TextEncoder().encode(JSON.stringify(value))
  let text = ''
  for (const b of bytes) text += String.fromCharCode(b)
  return btoa(text)
}

export function fromBase64Json(text: string): unknown {
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0))
  return JSON.parse(new TextDecoder().decode(bytes))
}

/** The credential as every TrueVault client sends it: HTTP Basic, token as user, no password. */
export function authorization(token: string): string {
  return `Basic ${btoa(`${token}:`)}`
}

export interface CallOptions {
  json?: unknown
  form?: Record<string, string | undefined>
  query?: Record<string, string | number | undefined>
  /** Sign-in: a 401 is the form's answer, not an expiry (and no session credential is sent). */
  anonymous?: boolean
  /** A credential of its own (the API-key sign-in's check), instead of the session's. */
  token?: string
}

export function withQuery(path: string, query: CallOptions['query']): string {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(query ?? {}))
    if (v !== undefined && v !== '') params.set(k, String(v))
  const text = params.toString()
  return text ? `${path}?${text}` : path
}

export function errorOf(status: number, body: unknown): ApiError {
  const error = (body as { error?: { message?: unknown; code?: unknown } } | null)?.error
  if (error && typeof error.message === 'string')
    return new ApiError(
      status,
      typeof error.code === 'string' ? error.code : 'ERROR',
      error.message,
    )
  return new ApiError(status, 'HTTP_ERROR', `The server answered ${status}`)
}

/** Reports a refused credential to the session (sign-in again) and returns the error. */
export function checked(error: ApiError, anonymous = false): ApiError {
  if (!anonymous && error.status === 401 && SESSION_GONE.has(error.code)) {
    session.clear()
    onExpired('Your session has ended (expired or signed out elsewhere): please sign in again.')
  }
  return error
}

/** One call to the API of this origin, authorised by the signed-in user's own token. */
export async function api<T = Record<string, unknown>>(
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' }
  const token = options.token ?? (options.anonymous ? undefined : session.get()?.token)
  if (token) headers.authorization = authorization(token)
  let body: string | undefined
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json'
    body = JSON.stringify(options.json)
  } else if (options.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded'
    const form = new URLSearchParams()
    for (const [k, v] of Object.entries(options.form)) if (v !== undefined) form.set(k, v)
    body = form.toString()
  }
  let response: Response
  try {
    response = await fetch(withQuery(path, options.query), {
      method,
      headers,
      body,
      credentials: 'omit',
    })
  } catch {
    throw new ApiError(0, 'NETWORK', 'The server could not be reached')
  }
  const text = await response.text()
  let parsed: unknown = null
  try {
    parsed = text ? JSON.parse(text) : null
  } catch {
    parsed = null
  }
  if (!response.ok) throw checked(errorOf(response.status, parsed), options.anonymous)
  return parsed as T
}

/** The field an error message names (`username is required`, `body/name must …`), if any. */
export function fieldOf(message: string, fields: readonly string[]): string | undefined {
  const first = message.replace(/^(body|querystring|params)\//, '').split(/[\s/[.]/, 1)[0] ?? ''
  return fields.find((f) => f === first)
}
