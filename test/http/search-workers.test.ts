import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { basicHeader } from '../helpers/app.js'
import { insertSchema, optionForm, type TestSchema } from '../helpers/search-fixtures.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { testDialect } from '../helpers/store.js'

/**
 * Searches on the SQLite read pool (issue 14), over real sockets, on a database file (the pool
 * needs one). A search is held in its worker while `<file>.hold` exists
 * (helpers/held-read-worker.ts), so "a search still running" is a state, not a race.
 */
const FIELDS: SchemaField[] = [{ name: 'name', type: 'string', index: true }]
const dir = mkdtempSync(join(tmpdir(), 'coffer-search-workers-'))
const heldWorker = new URL('../helpers/held-read-worker.js', import.meta.url)
const brokenWorker = new URL('../helpers/broken-read-worker.js', import.meta.url)

interface Fixture {
  server: TestServer
  file: string
  vault: string
  schema: TestSchema
}

async function fixture(options: {
  workers: number
  queue: number
  timeoutMs: number
  held?: boolean
  /** Workers that throw as they load (helpers/broken-read-worker.ts). */
  broken?: boolean
}): Promise<Fixture> {
  const file = join(dir, `${randomUUID()}.db`)
  if (options.broken) writeFileSync(`${file}.broken`, '')
  const server = await startTestServer({
    sqliteFile: file,
    sqliteReadWorkers: options.workers,
    ...(options.held ? { sqliteReadWorkerUrl: heldWorker } : {}),
    ...(options.broken ? { sqliteReadWorkerUrl: brokenWorker } : {}),
    searchLimits: { queue: options.queue },
    searchTimeoutMs: options.timeoutMs,
  })
  const t = server.testApp
  const v = await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'v' } })
  const vault = v.json().vault.id as string
  const schema = await insertSchema(t, t.admin.account_id, vault, FIELDS)
  return { server, file, vault, schema }
}

const auth = (f: Fixture) => ({ authorization: basicHeader(f.server.admin.api_key) })

function search(f: Fixture, name: string) {
  const option = { schema_id: f.schema.id, filter: { name: { type: 'eq', value: name } } }
  return fetch(`${f.server.url}/v1/vaults/${f.vault}/search`, {
    method: 'POST',
    headers: { ...auth(f), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(optionForm(option)).toString(),
    signal: AbortSignal.timeout(20_000),
  })
}

async function createDocument(f: Fixture, name: string): Promise<string> {
  const res = await fetch(`${f.server.url}/v1/vaults/${f.vault}/documents`, {
    method: 'POST',
    headers: { ...auth(f), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      document: Buffer.from(JSON.stringify({ name })).toString('base64'),
      schema_id: f.schema.id,
    }).toString(),
  })
  expect(res.status).toBe(200)
  return ((await res.json()) as { document_id: string }).document_id
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (check()) return true
    await sleep(25)
  }
  return check()
}

describe.skipIf(testDialect !== 'sqlite')('search on the SQLite read pool', () => {
  const fixtures: Fixture[] = []
  const make = async (o: Parameters<typeof fixture>[0]) => {
    const f = await fixture(o)
    fixtures.push(f)
    return f
  }
  afterAll(async () => {
    for (const f of fixtures) await f.server.close()
    rmSync(dir, { recursive: true, force: true })
  })

  describe('the real worker', () => {
    let f: Fixture
    beforeAll(async () => {
      f = await make({ workers: 2, queue: 8, timeoutMs: 5000 })
    })

    it('starts its threads on the first search, and runs searches on them, not inline', async () => {
      // None before: a node never asked a search carries no thread (issue 21, idle RSS).
      expect(f.server.testApp.deps.store.readPool?.liveThreads()).toBe(0)
      expect((await search(f, 'nobody')).status).toBe(200)
      expect(f.server.testApp.deps.store.readPool?.liveThreads()).toBe(2)
    })

    it('finds a document in the search right after its create was answered', async () => {
      for (let i = 0; i < 20; i++) {
        const name = `n-${i}`
        const id = await createDocument(f, name)
        const res = await search(f, name)
        expect(res.status).toBe(200)
        const body = (await res.json()) as {
          data: { documents: { document_id: string }[]; info: { total_result_count: number } }
        }
        expect(body.data.documents.map((d) => d.document_id)).toEqual([id])
        expect(body.data.info.total_result_count).toBe(1)
      }
    })

    it('no longer finds a document right after its delete was answered', async () => {
      const id = await createDocument(f, 'gone')
      const del = await fetch(`${f.server.url}/v1/vaults/${f.vault}/documents/${id}`, {
        method: 'DELETE',
        headers: auth(f),
      })
      expect(del.status).toBe(200)
      const body = (await (await search(f, 'gone')).json()) as {
        data: { info: { total_result_count: number } }
      }
      expect(body.data.info.total_result_count).toBe(0)
    })
  })

  describe('a held search', () => {
    it('answers 503 SEARCH_TIMEOUT past its bound, and its thread is replaced', async () => {
      // Long enough for the fresh thread to boot (tsx compiles the worker from source in tests)
      // within the next search's own bound, on a loaded machine too.
      const f = await make({ workers: 1, queue: 0, timeoutMs: 3000, held: true })
      writeFileSync(`${f.file}.hold`, '')
      const res = await search(f, 'x')
      expect(res.status).toBe(503)
      const body = (await res.json()) as { result: string; error: { code: string } }
      expect(body).toMatchObject({ result: 'error', error: { code: 'SEARCH_TIMEOUT' } })
      const pool = f.server.testApp.deps.store.readPool
      // Nothing left running: the held thread was terminated, one fresh thread remains.
      expect(await until(() => pool?.abandoned() === 0 && pool.liveThreads() === 1, 10_000)).toBe(
        true,
      )
      rmSync(`${f.file}.hold`)
      expect((await search(f, 'x')).status).toBe(200)
    })

    it('refuses a search beyond the workers and queue with 503 SEARCH_BUSY; other requests go on', async () => {
      const f = await make({ workers: 1, queue: 1, timeoutMs: 60_000, held: true })
      const id = await createDocument(f, 'x')
      writeFileSync(`${f.file}.hold`, '')
      const running = search(f, 'x')
      const queued = search(f, 'x')
      // Both admitted (one running in the held worker, one waiting) before the third comes.
      const gate = () => f.server.testApp.deps.searchReads.load()
      expect(await until(() => gate().running === 1 && gate().queued === 1, 10_000)).toBe(true)
      const refused = await search(f, 'x')
      expect(refused.status).toBe(503)
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('SEARCH_BUSY')
      // The main thread is free: a document read is answered while the search is held.
      const read = await fetch(`${f.server.url}/v1/vaults/${f.vault}/documents/${id}`, {
        headers: auth(f),
      })
      expect(read.status).toBe(200)
      rmSync(`${f.file}.hold`)
      expect((await running).status).toBe(200)
      expect((await queued).status).toBe(200)
    })
  })

  describe('workers that cannot start', () => {
    it('answers 503 SEARCH_UNAVAILABLE at once, not after the time bound; other requests go on', async () => {
      const f = await make({ workers: 2, queue: 8, timeoutMs: 60_000, broken: true })
      const id = await createDocument(f, 'x')
      for (let i = 0; i < 3; i++) {
        const started = Date.now()
        const res = await search(f, 'x')
        expect(res.status).toBe(503)
        expect(res.headers.get('retry-after')).toBe('5')
        const body = (await res.json()) as { result: string; error: { code: string } }
        expect(body).toMatchObject({ result: 'error', error: { code: 'SEARCH_UNAVAILABLE' } })
        // Well within the 60 s bound (the first may wait for a thread to fail as it loads).
        expect(Date.now() - started).toBeLessThan(15_000)
      }
      // Concurrent searches are refused too, none left waiting in the gate.
      const all = await Promise.all([1, 2, 3, 4].map(() => search(f, 'x')))
      expect(all.map((r) => r.status)).toEqual([503, 503, 503, 503])
      expect(f.server.testApp.deps.searchReads.load()).toEqual({ running: 0, queued: 0 })
      const read = await fetch(`${f.server.url}/v1/vaults/${f.vault}/documents/${id}`, {
        headers: auth(f),
      })
      expect(read.status).toBe(200)
    })
  })
})
