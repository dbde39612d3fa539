import { connect, createServer, type Server, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '../../test/helpers/rights.js'
import { TEST_PG_URL, testDialect } from '../../test/helpers/store.js'
import { PgRightsListener } from './pg-rights-listener.js'
import { pgConnection } from './pg-tls.js'
import { RightsFeed } from './rights-feed.js'

/**
 * A TCP proxy to PostgreSQL that can go silent: it stops forwarding without closing either
 * socket, as a dropped route or a firewall forgetting the flow does. No 'error' or 'end' ever
 * reaches the client then; only a round trip that never comes back shows the connection dead.
 */
async function silenceableProxy(target: URL, silentFrom?: string) {
  const sockets: Socket[] = []
  let silent = false
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    sockets.push(client, upstream)
    client.on('data', (d: Buffer) => {
      if (silentFrom && d.includes(silentFrom)) silent = true
      if (!silent) upstream.write(d)
    })
    upstream.on('data', (d) => silent || client.write(d))
    client.on('error', () => {})
    upstream.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  const url = new URL(target.href)
  url.hostname = '127.0.0.1'
  url.port = String(port)
  return {
    url: url.href,
    silence: () => {
      silent = true
    },
    close: () => {
      for (const s of sockets) s.destroy()
      server.close()
    },
  }
}

describe.runIf(testDialect === 'postgres')('PgRightsListener (postgres)', () => {
  const cleanups: (() => unknown)[] = []
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c()
  })

  it('fails closed when its connection goes silent without an error or an end', async () => {
    const proxy = await silenceableProxy(new URL(TEST_PG_URL))
    cleanups.push(proxy.close)
    const feed = new RightsFeed({ trusted: false, channel: 'coffer_rights_listener_test' })
    const errors: Error[] = []
    const listener = new PgRightsListener(feed, {
      connection: pgConnection(proxy.url),
      channel: 'coffer_rights_listener_test',
      connectTimeoutMs: 1000,
      onError: (e) => errors.push(e),
    })
    cleanups.push(() => listener.close())
    listener.start()
    await until('the listener up', () => feed.trusted)
    proxy.silence()
    await until('the silent connection distrusted', () => !feed.trusted)
    expect(errors.length).toBeGreaterThan(0)
  })

  it('retries, never trusting, when its LISTEN is never answered', async () => {
    const proxy = await silenceableProxy(new URL(TEST_PG_URL), 'LISTEN')
    cleanups.push(proxy.close)
    const feed = new RightsFeed({ trusted: false, channel: 'coffer_rights_listener_test' })
    const errors: Error[] = []
    const listener = new PgRightsListener(feed, {
      connection: pgConnection(proxy.url),
      channel: 'coffer_rights_listener_test',
      connectTimeoutMs: 1000,
      onError: (e) => errors.push(e),
    })
    cleanups.push(() => listener.close())
    listener.start()
    await until('the unanswered LISTEN failed', () => errors.length > 0)
    expect(feed.trusted).toBe(false)
  })
})
