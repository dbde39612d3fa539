import { randomBytes, randomUUID } from 'node:crypto'
import type { RecordedRequest, TwilioAccount } from './providers.js'

/**
 * How the stand-in (providers.ts) answers like SendGrid and Twilio: the checks the real APIs make
 * on what Coffer sends, refused in their own words and error shapes.
 */

export interface Reply {
  status: number
  body?: string | object
  headers?: Record<string, string>
}

const sendgridError = (status: number, message: string, field: string | null = null): Reply => ({
  status,
  body: { errors: [{ message, field, help: null }] },
})

const twilioError = (status: number, code: number, message: string): Reply => ({
  status,
  body: { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status },
})

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const DYNAMIC_TEMPLATE = /^d-[0-9a-f]{32}$/i

/** What SendGrid's v3 Mail Send checks, in its words. */
export function imitateSendGrid(req: RecordedRequest, keys: Set<string>): Reply {
  if (req.method !== 'POST' || req.path !== '/v3/mail/send')
    return sendgridError(404, 'resource not found')
  const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')
  if (!auth || !keys.has(auth[1] as string)) {
    return sendgridError(401, 'The provided authorization grant is invalid, expired, or revoked')
  }
  if (!req.headers['content-type']?.startsWith('application/json') || req.json === undefined)
    return sendgridError(400, 'Bad Request')
  const body = req.json as {
    personalizations?: {
      to?: { email?: unknown }[]
      substitutions?: Record<string, unknown>
      dynamic_template_data?: unknown
    }[]
    from?: { email?: unknown }
    template_id?: unknown
  }
  const p = body.personalizations
  if (!Array.isArray(p) || p.length === 0) {
    return sendgridError(400, 'The personalizations field is required.', 'personalizations')
  }
  for (const [i, one] of p.entries()) {
    if (
      !Array.isArray(one.to) ||
      one.to.length === 0 ||
      one.to.some((t) => typeof t.email !== 'string')
    )
      return sendgridError(400, 'The to array is required.', `personalizations.${i}.to`)
    for (const value of Object.values(one.substitutions ?? {})) {
      if (typeof value !== 'string')
        return sendgridError(
          400,
          'Substitutions must be strings.',
          `personalizations.${i}.substitutions`,
        )
    }
  }
  if (typeof body.from?.email !== 'string')
    return sendgridError(400, 'The from email is required.', 'from.email')
  const template = body.template_id
  if (typeof template !== 'string' || !(GUID.test(template) || DYNAMIC_TEMPLATE.test(template))) {
    return sendgridError(
      400,
      `The template_id must be a valid GUID, you provided '${String(template)}'.`,
      'template_id',
    )
  }
  // Dynamic (Handlebars) templates take dynamic_template_data; legacy tags are refused.
  if (DYNAMIC_TEMPLATE.test(template)) {
    for (const [i, one] of p.entries()) {
      if (one.substitutions !== undefined)
        return sendgridError(
          400,
          'Substitutions may not be used with dynamic templating',
          `personalizations.${i}.substitutions`,
        )
      const data = one.dynamic_template_data
      if (data !== undefined && (typeof data !== 'object' || data === null || Array.isArray(data)))
        return sendgridError(
          400,
          'The dynamic_template_data field must be an object.',
          `personalizations.${i}.dynamic_template_data`,
        )
    }
  }
  return { status: 202, headers: { 'x-message-id': randomBytes(16).toString('base64url') } }
}

/** What Twilio's Messages API checks, in its words. */
export function imitateTwilio(req: RecordedRequest, accounts: Map<string, TwilioAccount>): Reply {
  const m = /^\/2010-04-01\/Accounts\/([^/]+)\/Messages\.json$/.exec(req.path)
  if (req.method !== 'POST' || !m)
    return twilioError(404, 20404, 'The requested resource was not found')
  const sid = decodeURIComponent(m[1] as string)
  const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')
  const pair = basic ? Buffer.from(basic[1] as string, 'base64').toString('utf8') : ''
  const colon = pair.indexOf(':')
  const [user, secret] = [pair.slice(0, colon), pair.slice(colon + 1)]
  const account = accounts.get(sid)
  const authentic =
    colon > 0 &&
    account !== undefined &&
    ((user === sid && secret === account.authToken) || account.apiKeys.get(user) === secret)
  if (!authentic) return twilioError(401, 20003, 'Authenticate')
  if (!req.headers['content-type']?.startsWith('application/x-www-form-urlencoded') || !req.form)
    return twilioError(400, 21602, 'Message body is required.')
  const f = req.form
  const to = f.To?.[0]
  const from = f.From?.[0]
  if (!to) return twilioError(400, 21604, "A 'To' phone number is required.")
  if (!from) return twilioError(400, 21603, "A 'From' phone number is required.")
  const body = f.Body?.[0] ?? ''
  const media = f.MediaUrl ?? []
  if (body === '' && media.length === 0) return twilioError(400, 21602, 'Message body is required.')
  const messageSid = `SM${randomUUID().replace(/-/g, '')}`
  return {
    status: 201,
    body: {
      sid: messageSid,
      account_sid: sid,
      to,
      from,
      body,
      status: 'queued',
      num_media: String(media.length),
      direction: 'outbound-api',
      api_version: '2010-04-01',
      date_created: new Date().toUTCString(),
      uri: `/2010-04-01/Accounts/${sid}/Messages/${messageSid}.json`,
      error_code: null,
      error_message: null,
    },
  }
}

/**
 * A SendGrid that refuses the recipient and quotes it back, as sent, upper-cased and URL-encoded
 * (the shapes a provider's error text may take).
 */
export function sendgridQuotingRecipient(req: RecordedRequest): Reply {
  const body = req.json as { personalizations?: { to?: { email?: string }[] }[] } | undefined
  const to = body?.personalizations?.[0]?.to?.[0]?.email ?? ''
  return {
    status: 400,
    body: {
      errors: [
        {
          message: `The to address ${to} is on a suppression list.`,
          field: 'personalizations.0.to.0.email',
          help: `https://app.sendgrid.com/suppressions?email=${encodeURIComponent(to)}`,
        },
        { message: `Bounced: ${to.toUpperCase()}`, field: null, help: null },
      ],
    },
  }
}

/**
 * A Twilio that refuses the recipient (error 21211) and quotes it back as sent and formatted
 * the way Twilio shows numbers in its console (`+1 555-867-5309`).
 */
export function twilioQuotingRecipient(req: RecordedRequest): Reply {
  const to = req.form?.To?.[0] ?? ''
  const national = to.replace(/^\+1/, '')
  const formatted = `+1 ${national.slice(0, 3)}-${national.slice(3, 6)}-${national.slice(6)}`
  return twilioError(
    400,
    21211,
    `The 'To' number ${to} is not a valid phone number (shown as ${formatted}).`,
  )
}
