import type { LightMyRequestResponse } from 'fastify'
import { expect } from 'vitest'
import { b64, type TestApp } from './app.js'
import type { ProviderStandIn } from './providers.js'
import { TEST_SENDGRID_KEY, TEST_TWILIO } from './providers.js'

/** A SendGrid legacy template id (a GUID, as the stand-in requires). */
export const TEMPLATE_ID = '13b8f94f-bcae-4ec6-b752-70d6cb59f932'
/** A SendGrid dynamic (Handlebars) template id: `d-` and 32 hex digits. */
export const DYNAMIC_TEMPLATE_ID = 'd-0123456789abcdef0123456789abcdef'

/** A user with these attributes, created through the API; returns its id and username. */
export async function userWith(
  t: TestApp,
  attributes: unknown,
  username = `user-${Math.random().toString(36).slice(2)}@example.com`,
): Promise<{ id: string; username: string }> {
  const res = await t.api.post('/v1/users', {
    auth: t.admin.api_key,
    form: { username, attributes: b64(attributes) },
  })
  if (res.statusCode !== 200) throw new Error(`user create failed: ${res.body}`)
  return { id: res.json().user.id, username }
}

/** A valid email request body; `overrides` replace (or, as undefined, remove) fields. */
export function emailBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const body: Record<string, unknown> = {
    provider: 'SENDGRID',
    auth: { sendgrid_api_key: TEST_SENDGRID_KEY },
    template_id: TEMPLATE_ID,
    from_email_address: { literal_value: 'support@example.com' },
    to_email_address: { user_attribute: 'email' },
    substitutions: { '{{name}}': { user_attribute: 'name' } },
    ...overrides,
  }
  for (const [k, v] of Object.entries(overrides)) if (v === undefined) delete body[k]
  return body
}

/** A valid SMS request body (API key SID and secret); `overrides` as for emailBody. */
export function smsBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const body: Record<string, unknown> = {
    provider: 'TWILIO',
    auth: {
      account_sid: TEST_TWILIO.accountSid,
      username: TEST_TWILIO.keySid,
      password: TEST_TWILIO.keySecret,
    },
    from_number: { literal_value: '+15555555555' },
    to_number: { user_attribute: 'phone' },
    message_body: 'Hello',
    media_urls: [],
    ...overrides,
  }
  for (const [k, v] of Object.entries(overrides)) if (v === undefined) delete body[k]
  return body
}

export const sendEmail = (t: TestApp, userId: string, body: unknown, auth = t.admin.api_key) =>
  t.api.post(`/v1/users/${userId}/message/email`, { auth, json: body })

export const sendSms = (t: TestApp, userId: string, body: unknown, auth = t.admin.api_key) =>
  t.api.post(`/v1/users/${userId}/message/sms`, { auth, json: body })

/** The spec's provider-failure envelope; returns `error` for further checks. */
export function expectProviderFailure(
  res: LightMyRequestResponse,
  status: number,
  message: 'Error sending email' | 'Error sending SMS',
  code: string,
) {
  expect(res.statusCode, res.body).toBe(status)
  const body = res.json()
  expect(body.result).toBe('error')
  expect(typeof body.transaction_id).toBe('string')
  expect(body.error).toMatchObject({ type: 'request_failed', message, code })
  expect(typeof body.error.provider_error).toBe('object')
  return body.error as { provider_error: Record<string, unknown> }
}

/** A 400 naming the field, and nothing sent to any provider. */
export function expectRefused(
  res: LightMyRequestResponse,
  standIn: ProviderStandIn,
  message: string,
  status = 400,
): void {
  expect(res.statusCode, res.body).toBe(status)
  expect(res.json().error.message).toBe(message)
  expect(standIn.requests).toHaveLength(0)
}
