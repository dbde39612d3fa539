import { AppError, ErrorType } from '../../lib/errors.js'
import { ProviderError } from './provider-http.js'
import { redactValues } from './provider-redaction.js'

export const EMAIL_FAILED = 'Error sending email'
export const SMS_FAILED = 'Error sending SMS'

/** HTTP status and `error.code` for each kind of provider failure. */
function statusAndCode(e: ProviderError): [number, string] {
  switch (e.failure) {
    case 'rejected': {
      // The provider's own 4xx/5xx is passed on (spec: 4XX or 5XX); anything else (a redirect,
      // which is never followed) means the configured provider is not answering as one.
      const status = e.status ?? 502
      return [status >= 400 && status <= 599 ? status : 502, String(status)]
    }
    case 'bad_response':
      return [502, 'PROVIDER_BAD_RESPONSE']
    case 'unreachable':
      return [502, 'PROVIDER_UNREACHABLE']
    case 'timeout':
      return [504, 'PROVIDER_TIMEOUT']
  }
}

/**
 * The spec's envelope for a provider failure: type `request_failed`, the fixed message, and the
 * provider's error as `provider_error`, with every value in `fromUser` (what was read from the
 * user's data: the recipient above all) stripped out. Anything that is not a ProviderError is
 * passed through.
 */
export function providerFailure(
  error: unknown,
  message: string,
  fromUser: readonly string[] = [],
): unknown {
  if (!(error instanceof ProviderError)) return error
  const [status, code] = statusAndCode(error)
  return new AppError(status, ErrorType.requestFailed, code, message, {
    providerError: redactValues(error.detail, fromUser),
    // Logged with a 5xx: the network error behind an unreachable provider, nothing it sent.
    ...(error.cause !== undefined ? { cause: error.cause } : {}),
  })
}
