/**
 * Measures what COFFER_SHUTDOWN_DELAY_MS buys behind deploy/haproxy.cfg: two `coffer serve`
 * processes on one database behind a local HAProxy (the deploy config, with the nodes' local
 * addresses), clients sending GET /v1/auth/me and POST /v1/vaults as fast as they can through
 * it, and SIGTERM to one node; prints how many requests failed (not 200) and how.
 *
 *   node --import tsx bench/drain-haproxy.ts <delay ms> [clients]
 *
 * Needs `haproxy` on PATH (Debian: apt-get install haproxy). Database as in the tests:
 * TEST_DATABASE=postgres TEST_PG_URL=postgres://… for PostgreSQL, else a shared SQLite file.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { basicHeader } from '../test/helpers/app.js'
import {
  bootstrapCredentials,
  sharedDatabase,
  startServerProcess,
} from '../test/helpers/processes.js'

const delayMs = Number(process.argv[2] ?? '0')
const clients = Number(process.argv[3] ?? '32')
const PROXY_PORT = 18080
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const db = await sharedDatabase()
const [dir1, dir2] = [db.dataDir(), db.dataDir()]
const settings = { COFFER_SHUTDOWN_DELAY_MS: String(delayMs), COFFER_TRUST_PROXY: '127.0.0.1' }
const node1 = await startServerProcess({ ...db.env(dir1), ...settings })
const node2 = await startServerProcess({ ...db.env(dir2), ...settings })
const auth = basicHeader(bootstrapCredentials(dir1).api_key)

// The deploy config, API frontend only, with the nodes' local addresses instead of Docker DNS.
const port = (url: string) => new URL(url).port
const config = readFileSync('deploy/haproxy.cfg', 'utf8')
  .replace(/ resolvers docker init-addr last,libc,none/, '')
  .replace(/resolvers docker\n.*\n.*\n/, '')
  .replace(/frontend consent[\s\S]*$/, '')
  .replace(/ {2}log stdout.*\n/, '')
  // Plain HTTP here: the bench measures the drain, not TLS (no certificate to mount).
  .replace(/bind :8080.*/, `bind 127.0.0.1:${PROXY_PORT}`)
  .replace('server coffer-1 coffer-1:8080', `server coffer-1 127.0.0.1:${port(node1.url)}`)
  .replace('server coffer-2 coffer-2:8080', `server coffer-2 127.0.0.1:${port(node2.url)}`)
const configDir = mkdtempSync(join(tmpdir(), 'coffer-haproxy-'))
writeFileSync(join(configDir, 'haproxy.cfg'), config)
const proxy = spawn('haproxy', ['-db', '-f', join(configDir, 'haproxy.cfg')], { stdio: 'ignore' })
await sleep(3000) // both servers pass their first checks (rise 2, inter 2s)

const base = `http://127.0.0.1:${PROXY_PORT}`
const results: (number | string)[] = []
let stop = false
let made = 0
async function client(): Promise<void> {
  while (!stop) {
    const post = Math.random() < 0.5
    try {
      const res = post
        ? await fetch(`${base}/v1/vaults`, {
            method: 'POST',
            headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
            body: `name=v${made++}`,
          })
        : await fetch(`${base}/v1/auth/me`, { headers: { authorization: auth } })
      await res.text()
      results.push(res.status)
    } catch (e) {
      results.push(String((e as { cause?: { code?: string } }).cause?.code ?? e))
    }
  }
}
const running = Array.from({ length: clients }, client)
await sleep(2000)
const signalled = Date.now()
const exited = new Promise((r) => node1.child.once('exit', r))
node1.child.kill('SIGTERM')
await exited
const drainedMs = Date.now() - signalled
await sleep(2000)
stop = true
await Promise.all(running)

const failed: Record<string, number> = {}
for (const r of results.filter((r) => r !== 200)) failed[r] = (failed[r] ?? 0) + 1
console.log(JSON.stringify({ delayMs, clients, requests: results.length, failed, drainedMs }))
proxy.kill('SIGTERM')
await node2.stop()
await db.drop()
rmSync(configDir, { recursive: true, force: true })
