import { errors } from '../../lib/errors.js'
import { checkTemplateKeys } from './sendgrid-template-data.js'
import {
  parseValueSpec,
  resolveValueSpec,
  type ValueSpec,
  type ValueSpecTarget,
} from './value-spec.js'

/**
 * The request bodies of the two messaging endpoints, checked before any user is read: every
 * rule that does not depend on the user's data fails here with a 400 naming the field.
 */

export interface EmailInput {
  provider: string
  auth: { sendgrid_api_key: string }
  template_id: string
  from_email_address: unknown
  to_email_address: unknown
  substitutions?: Record<string, unknown> | null | undefined
}

export interface SmsInput {
  provider: string
  auth: { account_sid: string; username: string; password: string }
  from_number: unknown
  to_number: unknown
  message_body: string
  media_urls?: unknown[] | null | undefined
}

export interface EmailPlan {
  apiKey: string
  templateId: string
  from: ValueSpec
  to: ValueSpec
  substitutions: [key: string, spec: ValueSpec][]
}

export interface SmsPlan {
  accountSid: string
  username: string
  password: string
  from: ValueSpec
  to: ValueSpec
  body: string
  mediaUrls: ValueSpec[]
}

// Printable ASCII without spaces: a key travels in an HTTP header as is.
export const HEADER_SAFE = /^[\x21-\x7e]+$/
const ACCOUNT_SID = /^[A-Za-z0-9_-]+$/
const MAX_SUBSTITUTION_KEY = 255

/** The spec forbids ASP-style delimiters (`<%name%>`) in template tags. */
export function checkSubstitutionKey(key: string): void {
  if (key === '') throw errors.invalidField('substitutions', 'keys must not be empty')
  if (key.length > MAX_SUBSTITUTION_KEY) {
    throw errors.invalidField(
      'substitutions',
      `keys must be at most ${MAX_SUBSTITUTION_KEY} characters`,
    )
  }
  if (key.includes('<%') || key.includes('%>')) {
    throw errors.invalidField(
      `substitutions.${key}`,
      'must not use ASP-style <% %> delimiters; write the tag as in the template, e.g. {{name}}',
    )
  }
}

export function parseEmailInput(input: EmailInput): EmailPlan {
  if (input.provider !== 'SENDGRID') throw errors.invalidField('provider', 'must be SENDGRID')
  const apiKey = input.auth.sendgrid_api_key
  if (!HEADER_SAFE.test(apiKey)) {
    throw errors.invalidField('auth.sendgrid_api_key', 'must be printable ASCII without spaces')
  }
  const substitutions = Object.entries(input.substitutions ?? {}).map(
    ([key, spec]): [string, ValueSpec] => {
      checkSubstitutionKey(key)
      return [key, parseValueSpec(spec, `substitutions.${key}`)]
    },
  )
  checkTemplateKeys(
    input.template_id,
    substitutions.map(([key]) => key),
  )
  return {
    apiKey,
    templateId: input.template_id,
    from: parseValueSpec(input.from_email_address, 'from_email_address'),
    to: parseValueSpec(input.to_email_address, 'to_email_address', { allowLiteral: false }),
    substitutions,
  }
}

export function parseSmsInput(input: SmsInput): SmsPlan {
  if (input.provider !== 'TWILIO') throw errors.invalidField('provider', 'must be TWILIO')
  const { account_sid, username, password } = input.auth
  if (!ACCOUNT_SID.test(account_sid)) {
    throw errors.invalidField('auth.account_sid', 'must hold only letters, digits, _ and -')
  }
  // Basic auth splits at the first colon: a colon in the user name would change both halves.
  if (username.includes(':')) throw errors.invalidField('auth.username', 'must not contain ":"')
  if (/\p{Cc}/u.test(username) || /\p{Cc}/u.test(password)) {
    throw errors.invalidField('auth', 'username and password must not contain control characters')
  }
  const mediaUrls = (input.media_urls ?? []).map((spec, i) =>
    parseValueSpec(spec, `media_urls.${i}`),
  )
  if (input.message_body === '' && mediaUrls.length === 0)
    throw errors.invalidField('message_body', 'must not be empty when no media_urls are given')
  return {
    accountSid: account_sid,
    username,
    password,
    from: parseValueSpec(input.from_number, 'from_number'),
    to: parseValueSpec(input.to_number, 'to_number', { allowLiteral: false }),
    body: input.message_body,
    mediaUrls,
  }
}

/** Resolves every substitution for the user: key exactly as given → text. */
export function resolveSubstitutions(
  substitutions: EmailPlan['substitutions'],
  target: ValueSpecTarget,
): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const [key, spec] of substitutions) {
    out[key] = resolveValueSpec(spec, target, `substitutions.${key}`)
  }
  return out
}
