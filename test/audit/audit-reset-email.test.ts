import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { b64, buildTestApp, type TestApp } from '../helpers/app.js'
import { TEMPLATE_ID } from '../helpers/messaging.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
} from '../helpers/providers.js'

/**
 * The reset email is sent after the answer (the forgot-password page learns nothing), by work the
 * request started: its writes (the resend claim, the reset token) are not the request's, and
 * must not carry the request's event a second time.
 */
let t: TestApp
let providers: ProviderStandIn
beforeAll(async () => {
  providers = await startProviderStandIn()
  t = await buildTestApp({ providers: providers.config() })
})
afterAll(async () => {
  await t.close()
  await providers.close()
})

describe('password reset email and the audit trail', () => {
  it('each send leaves exactly one event', async () => {
    const auth = t.admin.api_key
    const flow = await t.api.post('/v1/password_reset_flows', {
      auth,
      json: {
        name: 'patients',
        sg_api_key: TEST_SENDGRID_KEY,
        sg_template_id: TEMPLATE_ID,
        user_email_value_spec: { user_attribute: 'email' },
        from_email_value_spec: { literal_value: 'support@example.com' },
      },
    })
    expect(flow.statusCode, flow.body).toBe(200)
    const flowId = flow.json().password_reset_flow.id as string
    const usernames: string[] = []
    for (let i = 0; i < 10; i++) {
      const username = `reset-${i}`
      const res = await t.api.post('/v1/users', {
        auth,
        form: { username, attributes: b64({ email: `${username}@example.com` }) },
      })
      expect(res.statusCode, res.body).toBe(200)
      usernames.push(username)
    }
    const answers = await Promise.all(
      usernames.map((username) =>
        t.api.post(`/v1/password_reset_flows/${flowId}/email`, { auth, json: { username } }),
      ),
    )
    for (const res of answers) expect(res.statusCode, res.body).toBe(200)
    await t.deps.passwordResets.idle()
    expect(providers.requestsTo('sendgrid')).toHaveLength(10)
    const ids = answers.map((res) => res.json().transaction_id as string)
    const events = await t.deps.store.db
      .selectFrom('audit_events')
      .select(['transaction_id', 'status', 'operation'])
      .where('transaction_id', 'in', ids)
      .execute()
    expect(events).toHaveLength(10)
    expect(new Set(events.map((e) => e.transaction_id)).size).toBe(10)
  })
})
