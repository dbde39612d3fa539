import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TEMPLATE_ID } from '../helpers/messaging.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
} from '../helpers/providers.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { expectApiError, sdkError, sdkFor, TRANSPORTS, uniqueName } from './support.js'

/** The SDK suite's flow schema (types only). */
function expectFlowShape(flow: Record<string, unknown>): void {
  for (const k of ['id', 'name', 'sg_template_id']) expect(typeof flow[k]).toBe('string')
  for (const k of ['substitutions', 'user_email_value_spec', 'from_email_value_spec'])
    expect(typeof flow[k]).toBe('object')
}

/** Mirrors the official SDK suite's "password reset flow → works", then a whole reset. */
describe.each(TRANSPORTS)('official SDK (%s): password reset flows', (transport) => {
  const Sdk = sdkFor(transport)
  let server: TestServer
  let providers: ProviderStandIn

  beforeAll(async () => {
    providers = await startProviderStandIn()
    server = await startTestServer({ providers: providers.config() })
  })
  afterAll(async () => {
    await server.close()
    await providers.close()
  })

  it('works', async () => {
    const admin = new Sdk({ apiKey: server.admin.api_key }, server.url)
    const flow = await admin.createPasswordResetFlow(
      uniqueName(),
      TEMPLATE_ID,
      TEST_SENDGRID_KEY,
      { user_attribute: 'email' },
      { literal_value: 'support@example.com' },
      {},
    )
    expectFlowShape(flow)
    expect(flow).not.toHaveProperty('sg_api_key')
    const flows = await admin.listPasswordResetFlows()
    for (const f of flows) expectFlowShape(f)
    expect(flows.map((f) => f.id)).toContain(flow.id)
    await admin.sendPasswordResetEmail(flow.id, `js_integration_test_${randomUUID()}`)
    const sat = await admin.createScopedAccessToken(
      uniqueName(),
      [{ Resources: ['Vault::'], Activities: 'C' }],
      new Date(Date.now() + 10_000),
    )
    await admin.linkScopedAccessTokenToPasswordResetFlow(flow.id, sat.id)
  })

  it('resets a password end to end with the token from the email', async () => {
    const admin = new Sdk({ apiKey: server.admin.api_key }, server.url)
    const flow = await admin.createPasswordResetFlow(
      uniqueName(),
      TEMPLATE_ID,
      TEST_SENDGRID_KEY,
      { user_attribute: 'email' },
      { literal_value: 'support@example.com' },
      { '{{name}}': { system_field: 'username' } },
    )
    const username = uniqueName()
    const user = await admin.createUser(username, 'forgotten password', {
      email: 'ada@example.com',
    })
    providers.reset()
    await admin.sendPasswordResetEmail(flow.id, username)
    await server.testApp.deps.passwordResets.idle()
    const [email] = providers.requestsTo('sendgrid')
    const sent = email?.json as { personalizations: { substitutions: Record<string, string> }[] }
    const subs = sent.personalizations[0]?.substitutions as Record<string, string>
    expect(subs['{{name}}']).toBe(username)
    expect(subs['{{user_id}}']).toBe(user.id)
    const page = new Sdk({ httpBasic: subs['{{reset_token}}'] as string }, server.url)
    await page.updateUserPassword(user.id, 'remembered password')
    const session = await Sdk.login(
      server.admin.account_id,
      username,
      'remembered password',
      undefined,
      server.url,
    )
    expect(typeof session.accessToken).toBe('string')
    expectApiError(await sdkError(page.updateUserPassword(user.id, 'second attempt pw')))
  })
})
