import { randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, type TestApp } from '../helpers/app.js'
import { logicalDump } from '../helpers/db-dump.js'
import { emailBody, sendEmail, sendSms, smsBody, userWith } from '../helpers/messaging.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
  TEST_TWILIO,
} from '../helpers/providers.js'

const canary = (label: string) => `${label}-${randomBytes(8).toString('hex')}`

/**
 * Provider keys are used for one request: never stored, never logged, never answered back; and
 * what a message carries about its user (addresses, numbers, attributes, a provider's error
 * quoting them) stays out of the log. Every path is exercised: success, refusal, 5xx, a dropped
 * connection and a timeout, on both endpoints.
 */
describe('messaging: secrets', () => {
  let standIn: ProviderStandIn
  let t: TestApp
  const lines: string[] = []
  const badKey = `SG.${canary('bad')}`
  const wrongSecret = canary('wrong-secret')
  const email = `${canary('mail')}@example.com`
  const phone = '+15551234567'
  const name = canary('Zebulon')
  const notAnAddress = canary('leaky value')
  const twilioPair = Buffer.from(`${TEST_TWILIO.keySid}:${TEST_TWILIO.keySecret}`).toString(
    'base64',
  )
  const tokenPair = Buffer.from(`${TEST_TWILIO.accountSid}:${TEST_TWILIO.authToken}`).toString(
    'base64',
  )
  const secrets = {
    'SendGrid key': TEST_SENDGRID_KEY,
    'refused SendGrid key': badKey,
    'Twilio key secret': TEST_TWILIO.keySecret,
    'Twilio auth token': TEST_TWILIO.authToken,
    'wrong Twilio secret': wrongSecret,
    'Twilio Basic pair (key)': twilioPair,
    'Twilio Basic pair (token)': tokenPair,
    'SendGrid key in base64': Buffer.from(TEST_SENDGRID_KEY).toString('base64'),
  }
  const personal = { 'recipient email': email, 'phone number': phone, 'attribute value': name }

  beforeAll(async () => {
    standIn = await startProviderStandIn()
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk))
        done()
      },
    })
    t = await buildTestApp({
      providers: standIn.config(1000),
      logger: { level: 'trace', stream },
    })
    const user = await userWith(t, { email, phone, name, bad: notAnAddress })
    const tokenAuth = {
      account_sid: TEST_TWILIO.accountSid,
      username: TEST_TWILIO.accountSid,
      password: TEST_TWILIO.authToken,
    }
    const statuses: number[] = []
    const email_ = async (body: Record<string, unknown>) =>
      statuses.push((await sendEmail(t, user.id, emailBody(body))).statusCode)
    const sms = async (body: Record<string, unknown>) =>
      statuses.push((await sendSms(t, user.id, smsBody(body))).statusCode)

    await email_({})
    await email_({ auth: { sendgrid_api_key: badKey } })
    await email_({ to_email_address: { user_attribute: 'bad' } })
    standIn.answerNext('sendgrid', { status: 500, body: `cannot deliver to ${email}` })
    await email_({})
    standIn.answerNext('sendgrid', { hangUp: true })
    await email_({})
    standIn.answerNext('sendgrid', { status: 202, delayMs: 20_000 })
    await email_({})
    await sms({})
    await sms({ auth: tokenAuth, media_urls: [{ literal_value: 'https://cdn.example.com/a.png' }] })
    await sms({ auth: { ...tokenAuth, password: wrongSecret } })
    standIn.answerNext('twilio', {
      status: 502,
      body: { code: 21211, message: `The 'To' number ${phone} is not a valid phone number.` },
    })
    await sms({})
    standIn.answerNext('twilio', { hangUp: true })
    await sms({})
    standIn.answerNext('twilio', { status: 201, delayMs: 20_000 })
    await sms({})
    // Every path above was taken: successes, a 400, provider refusals, 5xx, 502 and 504.
    expect(statuses).toEqual([200, 401, 400, 500, 502, 504, 200, 200, 401, 502, 502, 504])
  })
  afterAll(async () => {
    await t?.close()
    await standIn?.close()
  })

  it('the log records the requests and the failures, and none of the secrets or personal data', () => {
    const log = lines.join('')
    // The log did capture these requests (so the checks below can fail).
    expect(log).toContain('"route":"/v1/users/:user_id/message/email"')
    expect(log).toContain('"route":"/v1/users/:user_id/message/sms"')
    expect(log).toContain('"code":"PROVIDER_TIMEOUT"')
    expect(log).toContain('"code":"PROVIDER_UNREACHABLE"')
    for (const [label, value] of Object.entries({ ...secrets, ...personal })) {
      expect(log.includes(value), `${label} in the log`).toBe(false)
    }
    expect(log).not.toContain(notAnAddress)
    expect(log).not.toContain('provider_error')
  })

  it('the database holds none of the keys', async () => {
    const dump = await logicalDump(t.deps.store)
    expect(dump).toContain(t.admin.account_id)
    for (const [label, value] of Object.entries(secrets)) {
      expect(dump.includes(value), `${label} in the database`).toBe(false)
    }
  })

  it('the stand-in saw each key only where it belongs: in the Authorization header', () => {
    for (const r of standIn.requests) {
      const elsewhere = `${r.path}${r.query}${r.raw}`
      for (const value of Object.values(secrets)) expect(elsewhere).not.toContain(value)
    }
    expect(standIn.requests.map((r) => r.headers.authorization)).toContain(
      `Bearer ${TEST_SENDGRID_KEY}`,
    )
  })
})
