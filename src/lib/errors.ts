/**
 * The one error type services throw. The HTTP error handler renders it as the spec's envelope
 * `{result: "error", transaction_id, error: {message, type, code}}`; `cause` is logged, never sent.
 */
export class AppError extends Error {
  /** A provider's own error detail, sent as `error.provider_error` (spec, messaging). */
  declare readonly providerError?: Record<string, unknown>
  /** Sent as the `Retry-After` header (seconds) with a 429 or 503. */
  readonly retryAfterSeconds: number | undefined
  /**
   * A 5xx the service has described fully: logged once at error level with these fields (never
   * secrets) and the code, without a stack trace, which would say nothing more.
   */
  readonly logFields: Record<string, string> | undefined

  constructor(
    readonly statusCode: number,
    readonly type: string,
    readonly code: string,
    message: string,
    options?: {
      cause?: unknown
      providerError?: Record<string, unknown>
      retryAfterSeconds?: number
      logFields?: Record<string, string>
    },
  ) {
    super(message, options)
    this.name = 'AppError'
    this.retryAfterSeconds = options?.retryAfterSeconds
    this.logFields = options?.logFields
    // Not enumerable, so an error logged with its fields never carries it: a provider's error
    // text can quote the phone number or address it refused.
    if (options?.providerError)
      Object.defineProperty(this, 'providerError', { value: options.providerError })
  }
}

/** Error types: a short, stable list clients can switch on (codes carry the specifics). */
export const ErrorType = {
  invalidRequest: 'invalid_request_error',
  authentication: 'authentication_error',
  authorization: 'authorization_error',
  notFound: 'not_found_error',
  rateLimit: 'rate_limit_error',
  unavailable: 'service_unavailable',
  api: 'api_error',
  /** The spec's type for a messaging provider's failure. */
  requestFailed: 'request_failed',
} as const

export const errors = {
  /** 400 naming the offending field, e.g. badRequest('username', 'is required'). */
  invalidField: (field: string, problem: string) =>
    new AppError(400, ErrorType.invalidRequest, 'INVALID_PARAMETER', `${field} ${problem}`),
  badRequest: (code: string, message: string) =>
    new AppError(400, ErrorType.invalidRequest, code, message),
  unauthenticated: (message = 'Invalid or missing credentials') =>
    new AppError(401, ErrorType.authentication, 'UNAUTHENTICATED', message),
  invalidAuthorization: () =>
    new AppError(400, ErrorType.authentication, 'INVALID_AUTHORIZATION', 'Invalid authorization'),
  loginFailed: () =>
    new AppError(
      401,
      ErrorType.authentication,
      'LOGIN_FAILED',
      'Invalid account, username, password or MFA code',
    ),
  permissionDenied: () =>
    new AppError(
      401,
      ErrorType.authorization,
      'PERMISSION_DENIED',
      'The credential does not have permission for this request',
    ),
  credentialKindNotAllowed: (allowed: string) =>
    new AppError(
      401,
      ErrorType.authentication,
      'CREDENTIAL_NOT_ALLOWED',
      `This endpoint accepts only ${allowed}`,
    ),
  notFound: (what: string) =>
    new AppError(404, ErrorType.notFound, 'NOT_FOUND', `${what} not found`),
  conflict: (field: string, problem: string) =>
    new AppError(400, ErrorType.invalidRequest, 'ALREADY_EXISTS', `${field} ${problem}`),
  /** 429; `retryAfterSeconds` (when the window's end is known) becomes `Retry-After`. */
  rateLimited: (retryAfterSeconds?: number) =>
    new AppError(
      429,
      ErrorType.rateLimit,
      'TOO_MANY_ATTEMPTS',
      'Too many failed attempts; try again later',
      retryAfterSeconds === undefined ? undefined : { retryAfterSeconds },
    ),
  /** 503: a bounded resource (e.g. password hashing) is saturated; the client may retry soon. */
  busy: (what: string, retryAfterSeconds: number) =>
    new AppError(
      503,
      ErrorType.unavailable,
      'SERVER_BUSY',
      `The server is busy (${what}); try again shortly`,
      { retryAfterSeconds },
    ),
  /** 503: the database dropped or refused the connection; a retry reaches a healthy one. */
  /**
   * 507: the data folder's file system (or PostgreSQL's) has no room for this write, or its free
   * space is under COFFER_MIN_FREE_BYTES. Nothing of the write was kept; reads are still served.
   * When space returns is up to the operator: no Retry-After.
   */
  storageFull: (cause?: unknown) =>
    new AppError(
      507,
      ErrorType.unavailable,
      'STORAGE_FULL',
      'The server is out of storage space; the write was not stored',
      { cause },
    ),
  /**
   * 503: the request's audit event could not be stored (issue 13): nothing is answered that the
   * trail does not hold, and a write is rolled back with it.
   */
  auditUnavailable: (cause?: unknown) =>
    new AppError(
      503,
      ErrorType.unavailable,
      'AUDIT_UNAVAILABLE',
      'The audit trail could not record this request, so it was not carried out; try again shortly',
      { cause, retryAfterSeconds: 1 },
    ),
  databaseUnavailable: (cause?: unknown) =>
    new AppError(
      503,
      ErrorType.unavailable,
      'DATABASE_UNAVAILABLE',
      'The database is unavailable; try again shortly',
      { cause, retryAfterSeconds: 1 },
    ),
  /**
   * 503: the BLOB's row is intact but its content is missing from the BLOB store (deleted by
   * hand, a share not mounted, a replica behind). Not the client's doing, and a retry may work
   * once the store is repaired, which no one can time: no Retry-After.
   */
  blobContentUnavailable: (logFields: Record<string, string>) =>
    new AppError(
      503,
      ErrorType.unavailable,
      'BLOB_CONTENT_UNAVAILABLE',
      "The BLOB's content is missing from the BLOB store; the operator can restore it",
      { logFields },
    ),
  /**
   * 503: the BLOB store refused or dropped the connection, or answered with an error of its own
   * (no such bucket, denied credentials, a 5xx). A retry after a short wait may reach it.
   */
  blobStoreUnavailable: (logFields: Record<string, string>) =>
    new AppError(
      503,
      ErrorType.unavailable,
      'BLOB_STORE_UNAVAILABLE',
      'The BLOB store is unavailable; nothing was changed, try again shortly',
      { logFields, retryAfterSeconds: 5 },
    ),
  /** 504: the BLOB store did not answer within its deadline (COFFER_S3_DEADLINE_MS). */
  blobStoreTimeout: (deadlineMs: number, logFields: Record<string, string>) =>
    new AppError(
      504,
      ErrorType.unavailable,
      'BLOB_STORE_TIMEOUT',
      `The BLOB store did not answer within ${deadlineMs} ms; nothing was changed, try again later`,
      { logFields },
    ),
  /** 503: the request ran past its deadline; its database work was stopped and rolled back. */
  requestTimeout: (timeoutMs: number, cause?: unknown) =>
    new AppError(
      503,
      ErrorType.unavailable,
      'REQUEST_TIMEOUT',
      `The request took longer than ${timeoutMs} ms and was rolled back; try again later`,
      { cause, retryAfterSeconds: 1 },
    ),
}
