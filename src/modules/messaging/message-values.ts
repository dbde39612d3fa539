import { AppError, ErrorType } from '../../lib/errors.js'
import { resolveValueSpec, type ValueSpec, type ValueSpecTarget } from './value-spec.js'

/**
 * The values of one message, resolved in two steps so that the answers never describe the
 * user's data to a caller who may only message the user (C on `User::ID::Message`, no R):
 * literals are checked before the user is read, with errors that say exactly what is wrong;
 * values read from the user are resolved only after the per-user rate limit has been counted,
 * and any of them that cannot be sent gets one and the same answer (unset, an object, not an
 * address or number, a private host…), so probing an attribute path tells nothing about it.
 */

/** Turns a resolved text into what is sent, or throws a 400 naming `field`. */
export type ValueCheck = (value: string, field: string) => string

export interface MessageValue {
  field: string
  spec: ValueSpec
  check: ValueCheck
}

/** For values any text will do (substitutions). */
export const asIs: ValueCheck = (value) => value

/** The one answer for a value from the user's data that cannot be sent. */
export const unresolvableValue = (field: string) =>
  new AppError(
    400,
    ErrorType.invalidRequest,
    'UNRESOLVABLE_VALUE',
    `${field} does not resolve to a value that can be sent to this user`,
  )

/** Checks the literal values now: they come from the caller and say nothing about the user. */
export function checkLiteralValues(values: readonly MessageValue[]): void {
  for (const { field, spec, check } of values) {
    if ('literal_value' in spec) check(spec.literal_value, field)
  }
}

export interface ResolvedValues {
  /** What is sent, in the order of the values given. */
  texts: string[]
  /**
   * Every text read from the user's data, as stored and as sent: a provider's error may quote
   * them back, and they must not reach the caller that way (see provider-redaction.ts).
   */
  fromUser: string[]
}

/** Resolves every value for the user; call only after the rate limit has been counted. */
export function resolveMessageValues(
  values: readonly MessageValue[],
  target: ValueSpecTarget,
): ResolvedValues {
  const texts: string[] = []
  const fromUser: string[] = []
  for (const { field, spec, check } of values) {
    if ('literal_value' in spec) {
      texts.push(check(spec.literal_value, field))
      continue
    }
    let raw: string
    let text: string
    try {
      raw = resolveValueSpec(spec, target, field)
      text = check(raw, field)
    } catch (e) {
      // Every 400 the resolution or the check can give becomes the same one.
      if (e instanceof AppError && e.statusCode === 400) throw unresolvableValue(field)
      throw e
    }
    texts.push(text)
    fromUser.push(raw, text)
  }
  return { texts, fromUser }
}
