import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { b64, basicHeader } from '../helpers/app.js'
import { TEMPLATE_ID } from '../helpers/messaging.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  type SharedDatabase,
  sharedDatabase,
  startServerProcess,
} from '../helpers/processes.js'
import {
  type ProviderStandIn,
  startProviderStandIn,
  TEST_SENDGRID_KEY,
} from '../helpers/providers.js'
import { testDialect } from '../helpers/store.js'

/**
 * Issue 12, point 9a: "one reset email a minute per user and flow, a new link replaces the old"
 * holds across nodes: 20 concurrent requests split over two processes send exactly one email.
 */
describe(`reset emails from two server processes on one ${testDialect} database`, () => {
  let db: SharedDatabase
  let providers: ProviderStandIn
  const servers: ServerProcess[] = []
  let apiKey: string

  beforeAll(async () => {
    providers = await startProviderStandIn()
    db = await sharedDatabase()
    const firstDir = db.dataDir()
    const env = (dir: string) => ({
      ...db.env(dir),
      COFFER_SENDGRID_BASE_URL: providers.config().sendgridBaseUrl,
    })
    servers.push(await startServerProcess(env(firstDir)))
    servers.push(await startServerProcess(env(db.dataDir())))
    apiKey = bootstrapCredentials(firstDir).api_key
  }, 90_000)

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await db?.drop()
    await providers?.close()
  })

  const post = (server: ServerProcess, path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { authorization: basicHeader(apiKey), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })

  it('20 concurrent requests over two nodes send one email with the one valid link', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess]
    const flowRes = await post(a, '/v1/password_reset_flows', {
      name: 'patients',
      sg_api_key: TEST_SENDGRID_KEY,
      sg_template_id: TEMPLATE_ID,
      user_email_value_spec: { user_attribute: 'email' },
      from_email_value_spec: { literal_value: 'support@example.com' },
    })
    expect(flowRes.status).toBe(200)
    const flowId = ((await flowRes.json()) as { password_reset_flow: { id: string } })
      .password_reset_flow.id
    const userRes = await post(a, '/v1/users', {
      username: 'ada',
      password: 'old password 1',
      attributes: b64({ email: 'ada@example.com' }),
    })
    expect(userRes.status).toBe(200)
    const userId = ((await userRes.json()) as { user: { id: string } }).user.id
    providers.reset()
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        post(i % 2 ? b : a, `/v1/password_reset_flows/${flowId}/email`, { username: 'ada' }),
      ),
    )
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200))
    // The emails go out after the answers: wait for the first, then long enough for any other.
    for (let i = 0; i < 100 && providers.requestsTo('sendgrid').length === 0; i++) await sleep(50)
    await sleep(2_000)
    expect(providers.requestsTo('sendgrid')).toHaveLength(1)
    const store = db.open()
    try {
      const links = await store.db
        .selectFrom('scoped_access_tokens')
        .select('id')
        .where('name', '=', `password reset: ${flowId}`)
        .where('policy', 'like', `%${userId}%`)
        .execute()
      expect(links).toHaveLength(1)
    } finally {
      await store.close()
    }
  })
})
