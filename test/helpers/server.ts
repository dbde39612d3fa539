import type { AddressInfo } from 'node:net'
import { type Admin, buildTestApp, type TestApp, type TestAppOptions } from './app.js'

export interface TestServer {
  /**
   * Base URL without a trailing slash (`http://127.0.0.1:PORT`, `https://…` with TLS): the SDK
   * builds `${host}/${path}`.
   */
  url: string
  /** Admin of the first account (full access). */
  admin: Admin
  /** The app behind the socket, for set-up that the SDK cannot do. */
  testApp: TestApp
  close(): Promise<void>
}

/**
 * The test app (see buildTestApp) listening on a real socket on a free loopback port, so clients
 * such as the official SDK talk to it over HTTP exactly as they would in production.
 */
export async function startTestServer(options: TestAppOptions = {}): Promise<TestServer> {
  const testApp = await buildTestApp(options)
  try {
    await testApp.app.listen({ host: '127.0.0.1', port: 0 })
  } catch (e) {
    await testApp.close()
    throw e
  }
  const { port } = testApp.app.server.address() as AddressInfo
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    admin: testApp.admin,
    testApp,
    close: () => testApp.close(),
  }
}
