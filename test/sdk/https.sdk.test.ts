import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadTlsMaterial } from '../../src/http/tls-material.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { makeTestPki, type TestPki } from '../helpers/tls-pki.js'
import { TRANSPORTS } from './transports.js'

const execFileAsync = promisify(execFile)
const CLIENT = fileURLToPath(new URL('./over-https.client.ts', import.meta.url))
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href

/**
 * Issue 19: the official SDK keeps working when Coffer serves TLS. It runs in a process of its
 * own (over-https.client.ts) that trusts the test CA through NODE_EXTRA_CA_CERTS, against this
 * process's server on a real TLS socket; both of its transports (global fetch, node-fetch).
 */
describe('official SDK over HTTPS', () => {
  let pki: TestPki
  let server: TestServer

  beforeAll(async () => {
    pki = makeTestPki()
    const tls = await loadTlsMaterial({
      certFile: pki.leaf.certFile,
      keyFile: pki.leaf.keyFile,
      certSetting: 'COFFER_TLS_CERT_FILE',
      keySetting: 'COFFER_TLS_KEY_FILE',
    })
    server = await startTestServer({ tls })
  })
  afterAll(async () => {
    await server?.close()
    pki?.close()
  })

  async function runClient(extraCa: string | undefined) {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      COFFER_URL: server.url,
      COFFER_API_KEY: server.admin.api_key,
    }
    delete env.NODE_EXTRA_CA_CERTS
    delete env.NODE_TLS_REJECT_UNAUTHORIZED
    if (extraCa) env.NODE_EXTRA_CA_CERTS = extraCa
    const { stdout } = await execFileAsync(process.execPath, ['--import', TSX, CLIENT], { env })
    return stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
  }

  it('works with both transports when the client trusts the CA', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
    const results = await runClient(pki.ca.certFile)
    expect(results.map((r) => r.transport)).toEqual([...TRANSPORTS])
    for (const result of results) {
      expect(result).toEqual({
        transport: result.transport,
        user: server.admin.userId,
        document: { name: 'Ada', transport: result.transport },
        blob: true,
      })
    }
  })

  it('refuses the server when the client does not trust the CA (verification is on)', async () => {
    const results = await runClient(undefined)
    expect(results).toHaveLength(TRANSPORTS.length)
    for (const result of results) {
      expect(result.user).toBeUndefined()
      expect(`${result.code} ${result.error}`).toMatch(
        /UNABLE_TO_VERIFY_LEAF_SIGNATURE|unable to verify the first certificate/,
      )
    }
  })
})
