import { randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
/**
 * Upgrade from earlier releases: each one's data folder (SQLite) or PostgreSQL schema (a
 * plain-SQL dump) with one of everything, written through its own API by
 * test/fixtures/generate-release.mjs, is opened by the current `coffer serve`, which migrates
 * it; everything the old release wrote must still work.
 * - previous-release: b9fbc90 (before migrations 0010 and 0011);
 * - release-bab4ec1: bab4ec1, the schema before migration 0012 (shard-ready keys), which
 *   re-keys credentials, SATs and login counters: it also has a SAT with uses left and a spent
 *   per-address login window.
 */
import Database from 'better-sqlite3-multiple-ciphers'
import { sql } from 'kysely'
import { Secret, TOTP } from 'otpauth'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyChains } from '../src/audit/verify.js'
import { MasterKey } from '../src/crypto/master-key.js'
import { sqliteFileState } from '../src/store/sqlite-cipher.js'
import {
  clusterBlobEnv,
  openCofferStore,
  type ServerProcess,
  startServerProcess,
} from './helpers/processes.js'
import { readSchema, shardRuleViolations } from './helpers/shard-rule.js'
import { TEST_PG_URL, testDialect } from './helpers/store.js'

interface Sat {
  id: string
  http_auth: { username: string; password: string }
}
interface Fixture {
  release: string
  schema?: string
  masterKey?: string
  consentJwtSecret?: string
  bootstrap: { account_id: string; username: string; password: string; api_key: string }
  user: { id: string; username: string; password: string; accessToken: string }
  adminAccessToken: string
  mfaUser: { id: string; username: string; password: string; secret: string }
  vault: {
    id: string
    schemaId: string
    documents: { id: string; content: { name: string; age: number } }[]
  }
  blob: { id: string; base64: string }
  sats: { byApiKey: Sat; byAccessToken: Sat }
  consent: { query: Record<string, string>; record: Record<string, unknown> }
  /** From bab4ec1 on: a SAT with `remainingUses` of its allowed uses left. */
  limitedSat?: { sat: Sat; remainingUses: number }
  /** From bab4ec1 on: the per-address login window of `address` is spent. */
  throttle?: { address: string; maxFailures: number }
}

/** Length of the API keys and access tokens each release issued. */
const CREDENTIAL_LENGTH: Record<string, number> = { b9fbc90: 43, bab4ec1: 36 }

// biome-ignore lint/suspicious/noExplicitAny: response bodies, checked field by field
type Json = any

for (const folder of ['previous-release', 'release-bab4ec1']) upgradeSuite(folder)

function upgradeSuite(folder: string): void {
  const FIXTURE_DIR = join(import.meta.dirname, 'fixtures', folder, testDialect)
  const fixture = JSON.parse(readFileSync(join(FIXTURE_DIR, 'fixture.json'), 'utf8')) as Fixture
  const length = CREDENTIAL_LENGTH[fixture.release] as number

  describe(`upgrade from ${fixture.release} (${folder}, ${testDialect})`, () => {
    let dataDir: string
    let databaseUrl: string
    let dropSchema = async () => {}
    let server: ServerProcess
    let consentUrl: string

    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64')
    const basic = (user: string, password = '') =>
      `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`

    async function call(
      method: string,
      path: string,
      o: { auth?: string; form?: Record<string, string>; headers?: Record<string, string> } = {},
    ): Promise<{ status: number; body: string; json: () => Json }> {
      const headers: Record<string, string> = { ...o.headers }
      if (o.auth) headers.authorization = o.auth
      let body: string | undefined
      if (o.form) {
        headers['content-type'] = 'application/x-www-form-urlencoded'
        body = new URLSearchParams(o.form).toString()
      }
      const res = await fetch(`${server.url}${path}`, { method, headers, body })
      const text = await res.text()
      return { status: res.status, body: text, json: () => JSON.parse(text) }
    }

    const login = (form: Record<string, string>, headers?: Record<string, string>) =>
      call('POST', '/v1/auth/login', {
        form: { account_id: fixture.bootstrap.account_id, ...form },
        ...(headers ? { headers } : {}),
      })

    /**
     * The fixture's login windows, moved to now: as if the upgrade followed the failures at once
     * (its windows would otherwise have run out long before the test runs). Old schema: no scope.
     */
    const THROTTLE_NOW = `update login_throttle set window_started_at = '${new Date().toISOString()}'`

    /** The previous release's PostgreSQL schema, loaded under a fresh name. */
    async function loadDump(): Promise<string> {
      const schema = `coffer_prev_${randomBytes(6).toString('hex')}`
      const sql = readFileSync(join(FIXTURE_DIR, 'dump.sql'), 'utf8')
        .split('\n')
        // psql meta-commands (\restrict) are no SQL.
        .filter((line) => !line.startsWith('\\'))
        .join('\n')
        .replaceAll(fixture.schema as string, schema)
      const c = new pg.Client({ connectionString: TEST_PG_URL })
      await c.connect()
      try {
        await c.query(sql)
        await c.query(`set search_path = ${schema}`)
        await c.query(THROTTLE_NOW)
      } finally {
        await c.end()
      }
      dropSchema = async () => {
        const d = new pg.Client({ connectionString: TEST_PG_URL })
        await d.connect()
        await d.query(`drop schema if exists ${schema} cascade`)
        await d.end()
      }
      const u = new URL(TEST_PG_URL)
      u.searchParams.set('options', `-c search_path=${schema}`)
      return u.toString()
    }

    beforeAll(async () => {
      dataDir = mkdtempSync(join(tmpdir(), 'coffer-upgrade-'))
      cpSync(join(FIXTURE_DIR, 'datadir'), dataDir, { recursive: true })
      const env: Record<string, string> = {
        COFFER_DATA_DIR: dataDir,
        COFFER_SERVE: 'both',
        COFFER_CONSENT_PORT: '0',
        // The throttled address is given by X-Forwarded-For, behind one proxy hop (as generated).
        COFFER_TRUST_PROXY: '1',
        ...(fixture.throttle
          ? { COFFER_LOGIN_ADDRESS_MAX_FAILURES: String(fixture.throttle.maxFailures) }
          : {}),
      }
      if (testDialect === 'postgres') {
        databaseUrl = await loadDump()
        env.COFFER_DATABASE_URL = databaseUrl
        // The release under test asks a cluster for its BLOB folder; the old one used this one.
        Object.assign(env, clusterBlobEnv(join(dataDir, 'blobs')))
        env.COFFER_MASTER_KEY = fixture.masterKey as string
        env.COFFER_CONSENT_JWT_SECRET = fixture.consentJwtSecret as string
      } else {
        databaseUrl = join(dataDir, 'coffer.db')
        const file = new Database(databaseUrl)
        file.exec(THROTTLE_NOW)
        file.close()
      }
      server = await startServerProcess(env)
      for (let i = 0; i < 100 && !consentUrl; i++) {
        const m = /Consent API listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(server.output())
        if (m) consentUrl = m[1] as string
        else await new Promise((r) => setTimeout(r, 50))
      }
      if (!consentUrl) throw new Error(`no consent listener: ${server.output()}`)
    }, 60_000)

    afterAll(async () => {
      await server?.stop()
      await dropSchema()
      rmSync(dataDir, { recursive: true, force: true })
    })

    it(`keeps the bootstrap admin API key (${length} characters) working`, async () => {
      expect(fixture.bootstrap.api_key).toHaveLength(length)
      const res = await call('GET', '/v1/auth/me', { auth: basic(fixture.bootstrap.api_key) })
      expect(res.status, res.body).toBe(200)
      expect(res.json().user.username).toBe(fixture.bootstrap.username)
    })

    it('keeps the access tokens of logins working', async () => {
      for (const [token, username] of [
        [fixture.user.accessToken, fixture.user.username],
        [fixture.adminAccessToken, fixture.bootstrap.username],
      ] as const) {
        expect(token).toHaveLength(length)
        const res = await call('GET', '/v1/auth/me', { auth: basic(token) })
        expect(res.status, res.body).toBe(200)
        expect(res.json().user.username).toBe(username)
      }
    })

    it('logs the users in with their passwords, and the new token works', async () => {
      const res = await login({ username: fixture.user.username, password: fixture.user.password })
      expect(res.status, res.body).toBe(200)
      const token = res.json().user.access_token as string
      expect(token).toHaveLength(36)
      const me = await call('GET', '/v1/auth/me', { auth: basic(token) })
      expect(me.status, me.body).toBe(200)
      expect(me.json().user.id).toBe(fixture.user.id)
      const admin = await login({
        username: fixture.bootstrap.username,
        password: fixture.bootstrap.password,
      })
      expect(admin.status, admin.body).toBe(200)
    })

    it('reads the account settings as the defaults, through the upgraded admin group', async () => {
      // Migration 0013: the untouched full-access group gains Account::.*::Settings.
      const res = await call('GET', `/v1/accounts/${fixture.bootstrap.account_id}/settings`, {
        auth: basic(fixture.bootstrap.api_key),
      })
      expect(res.status, res.body).toBe(200)
      expect(res.json().settings).toEqual({
        max_access_token_duration_seconds: null,
        require_mfa: false,
        password_min_length: 8,
        session_revocation_on_password_change: true,
        // Migration 0015: no quota.
        daily_operations_quota: null,
      })
      const groups = await call('GET', '/v1/groups', { auth: basic(fixture.bootstrap.api_key) })
      const admin = groups.json().groups.find((g: { name: string }) => g.name === 'FULL_ADMIN')
      expect(admin.policy[0].Resources).toContain('Account::.*::Settings')
    })

    it('reads the usage as zero, then counts a read (migration 0015)', async () => {
      const auth = basic(fixture.bootstrap.api_key)
      // Yesterday to tomorrow: the server's UTC day, whenever this runs.
      const day = (offset: number) =>
        new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10)
      const usage = async () => {
        const res = await call(
          'GET',
          `/v1/accounts/${fixture.bootstrap.account_id}/usage?from=${day(-1)}&to=${day(1)}`,
          { auth },
        )
        expect(res.status, res.body).toBe(200)
        return res.json().usage.totals as Record<string, number>
      }
      // Nothing before this test consumed operations (logins and settings count none).
      expect(Object.values(await usage()).every((n) => n === 0)).toBe(true)
      const doc = fixture.vault.documents[0]?.id
      const read = await call('GET', `/v2/vaults/${fixture.vault.id}/documents/${doc}`, { auth })
      expect(read.status, read.body).toBe(200)
      expect((await usage()).document_read).toBe(1)
    })

    it('keeps the MFA enrolment: no code is refused, a fresh code logs in', async () => {
      const { username, password, secret } = fixture.mfaUser
      const without = await login({ username, password })
      expect(without.status, without.body).not.toBe(200)
      // Enrolment used the codes of its step and the next: a fixture younger than a minute has no
      // fresh code yet (regenerate, then wait a minute before running this).
      const code = TOTP.generate({ secret: Secret.fromBase32(secret), timestamp: Date.now() })
      const res = await login({ username, password, mfa_code: code })
      expect(res.status, res.body).toBe(200)
      expect(res.json().user.id).toBe(fixture.mfaUser.id)
    })

    it('keeps both SATs working (minted by an API key and by an access token)', async () => {
      for (const sat of [fixture.sats.byApiKey, fixture.sats.byAccessToken]) {
        const auth = basic(sat.http_auth.username, sat.http_auth.password)
        const res = await call(
          'GET',
          `/v1/vaults/${fixture.vault.id}/documents/${fixture.vault.documents[0]?.id}`,
          { auth },
        )
        expect(res.status, `${sat.id}: ${res.body}`).toBe(200)
      }
    })

    it.runIf(fixture.limitedSat)('keeps a limited SAT’s remaining uses, no more', async () => {
      const { sat, remainingUses } = fixture.limitedSat as NonNullable<Fixture['limitedSat']>
      const auth = basic(sat.http_auth.username, sat.http_auth.password)
      const path = `/v1/vaults/${fixture.vault.id}/documents/${fixture.vault.documents[0]?.id}`
      const statuses: number[] = []
      for (let i = 0; i <= remainingUses; i++)
        statuses.push((await call('GET', path, { auth })).status)
      expect(statuses).toEqual([...Array(remainingUses).fill(200), 401])
    })

    it.runIf(fixture.throttle)('keeps a spent per-address login window spent', async () => {
      const { address } = fixture.throttle as NonNullable<Fixture['throttle']>
      const right = { username: fixture.user.username, password: fixture.user.password }
      const refused = await login(right, { 'x-forwarded-for': address })
      expect(refused.status, refused.body).toBe(429)
      // The same right password from another address: the refusal was the carried-over window.
      const other = await login(right, { 'x-forwarded-for': '203.0.113.10' })
      expect(other.status, other.body).toBe(200)
    })

    it('reads the documents back and searches the indexed field with a sort', async () => {
      const auth = basic(fixture.bootstrap.api_key)
      for (const doc of fixture.vault.documents) {
        const res = await call('GET', `/v1/vaults/${fixture.vault.id}/documents/${doc.id}`, {
          auth,
        })
        expect(res.status, res.body).toBe(200)
        // The v1 read answers the document's base64 itself.
        expect(JSON.parse(Buffer.from(res.body, 'base64').toString('utf8'))).toEqual(doc.content)
      }
      const search = await call('POST', `/v1/vaults/${fixture.vault.id}/search`, {
        auth,
        form: {
          search_option: b64({
            filter: { age: { type: 'range', value: { gte: 30 } } },
            sort: [{ age: 'desc' }],
            schema_id: fixture.vault.schemaId,
          }),
        },
      })
      expect(search.status, search.body).toBe(200)
      const expected = fixture.vault.documents
        .filter((d) => d.content.age >= 30)
        .sort((a, b) => b.content.age - a.content.age)
        .map((d) => d.id)
      expect(
        search.json().data.documents.map((h: { document_id: string }) => h.document_id),
      ).toEqual(expected)
    })

    it('shows no re-index for the upgraded schema, then re-indexes a change of fields (migration 0018)', async () => {
      const auth = basic(fixture.bootstrap.api_key)
      const path = `/v1/vaults/${fixture.vault.id}/schemas/${fixture.vault.schemaId}`
      const progress = async () => {
        const res = await call('GET', `${path}/reindex`, { auth })
        expect(res.status, res.body).toBe(200)
        return res.json().reindex
      }
      expect(await progress()).toEqual({ state: 'none', documents_done: 0, documents_total: 0 })
      const schema = (await call('GET', path, { auth })).json().schema
      const put = (fields: unknown) =>
        call('PUT', path, { auth, form: { schema: b64({ name: schema.name, fields }) } })
      const ageOnly = schema.fields.filter((f: { name: string }) => f.name === 'age')
      expect((await put(ageOnly)).status).toBe(200)
      const n = fixture.vault.documents.length
      expect(await progress()).toEqual({ state: 'done', documents_done: n, documents_total: n })
      // Back as it was, for the tests after this one.
      expect((await put(schema.fields)).status).toBe(200)
    })

    it('searches through the covering indexes of migration 0016: unsorted, negated and combined, totals exact', async () => {
      const auth = basic(fixture.bootstrap.api_key)
      const docs = fixture.vault.documents
      const search = async (option: Record<string, unknown>) => {
        const res = await call('POST', `/v1/vaults/${fixture.vault.id}/search`, {
          auth,
          form: { search_option: b64({ ...option, schema_id: fixture.vault.schemaId }) },
        })
        expect(res.status, res.body).toBe(200)
        const data = res.json().data
        return {
          ids: data.documents.map((h: { document_id: string }) => h.document_id) as string[],
          total: data.info.total_result_count as number,
        }
      }
      const byId = (list: typeof docs) => list.map((d) => d.id).sort()
      const first = docs[0] as (typeof docs)[number]
      // Unsorted pages come in id order.
      expect(await search({ filter: { name: { type: 'eq', value: first.content.name } } })).toEqual(
        {
          ids: byId(docs.filter((d) => d.content.name === first.content.name)),
          total: docs.filter((d) => d.content.name === first.content.name).length,
        },
      )
      const notFirst = docs.filter((d) => d.content.name !== first.content.name)
      expect(
        await search({ filter: { name: { type: 'not', value: first.content.name } } }),
      ).toEqual({ ids: byId(notFirst), total: notFirst.length })
      const both = docs.filter((d) => d.content.age >= 30 && d.content.name !== first.content.name)
      expect(
        await search({
          filter_type: 'and',
          filter: {
            age: { type: 'range', value: { gte: 30 } },
            name: { type: 'not', value: first.content.name },
          },
        }),
      ).toEqual({ ids: byId(both), total: both.length })
      const ci = docs.filter(
        (d) => d.content.name.toLowerCase() === first.content.name.toLowerCase(),
      )
      expect(
        await search({
          filter: {
            name: { type: 'eq', value: first.content.name.toUpperCase(), case_sensitive: false },
          },
        }),
      ).toEqual({ ids: byId(ci), total: ci.length })
      // The indexes the search now names exist; the ones 0016 replaced are gone.
      const store = openCofferStore(databaseUrl, undefined, { pg: { poolSize: 1 } })
      try {
        const indexes =
          testDialect === 'postgres'
            ? await sql<{ name: string }>`select indexname as name from pg_indexes
                where schemaname = current_schema()`.execute(store.db)
            : await sql<{ name: string }>`select name from sqlite_master
                where type = 'index'`.execute(store.db)
        const names = indexes.rows.map((r) => r.name)
        expect(names).toEqual(
          expect.arrayContaining([
            'search_index_text_doc',
            'search_index_lower_doc',
            'search_index_num_doc',
            'search_index_geo_box',
            'search_index_probe',
            'documents_by_schema_id',
            'documents_by_owner_schema',
          ]),
        )
        for (const old of ['search_index_text', 'search_index_sort', 'documents_by_owner'])
          expect(names).not.toContain(old)
      } finally {
        await store.close()
      }
    })

    it('downloads the BLOB byte-identical', async () => {
      const res = await fetch(
        `${server.url}/v1/vaults/${fixture.vault.id}/blobs/${fixture.blob.id}`,
        {
          headers: { authorization: basic(fixture.bootstrap.api_key) },
        },
      )
      expect(res.status).toBe(200)
      expect(
        Buffer.from(await res.arrayBuffer()).equals(Buffer.from(fixture.blob.base64, 'base64')),
      ).toBe(true)
    })

    it('reads the consent record back for the same consumer', async () => {
      const res = await fetch(
        `${consentUrl}/api/v1/cmp/consent?${new URLSearchParams(fixture.consent.query)}`,
      )
      const body = (await res.json()) as Json
      expect(res.status, JSON.stringify(body)).toBe(200)
      const { jwt: _jwt, ...rest } = body
      const { jwt: _old, ...was } = fixture.consent.record
      expect(rest).toEqual({ ...was, isExisting: true })
    })

    it('leaves an upgraded schema that keeps the shard rule', async () => {
      const store = openCofferStore(databaseUrl, undefined, { pg: { poolSize: 1 } })
      try {
        expect(shardRuleViolations(await readSchema(store.db))).toEqual([])
      } finally {
        await store.close()
      }
    })

    it('audits after the upgrade: the admin group reads the trail (migration 0014), and it verifies', async () => {
      const groups = await call('GET', '/v1/groups', { auth: basic(fixture.bootstrap.api_key) })
      const admin = groups.json().groups.find((g: { name: string }) => g.name === 'FULL_ADMIN')
      expect(admin.policy[0].Resources).toContain('Audit::')
      const res = await call('GET', '/v1/audit_events?operation=group.list', {
        auth: basic(fixture.bootstrap.api_key),
      })
      expect(res.status, res.body).toBe(200)
      expect(res.json().data.items[0]).toMatchObject({
        operation: 'group.list',
        decision: 'allowed',
        account_id: fixture.bootstrap.account_id,
      })
      const store = openCofferStore(databaseUrl, undefined, { pg: { poolSize: 1 } })
      try {
        const report = await verifyChains(store.db)
        expect(report.problems).toEqual([])
        expect(report.events).toBeGreaterThan(5)
      } finally {
        await store.close()
      }
    })

    it('simulates policies after the upgrade: the admin group holds PolicySimulator:: (migration 0017)', async () => {
      const groups = await call('GET', '/v1/groups', { auth: basic(fixture.bootstrap.api_key) })
      const admin = groups.json().groups.find((g: { name: string }) => g.name === 'FULL_ADMIN')
      expect(admin.policy[0].Resources).toContain('PolicySimulator::')
      const resource = `Vault::${fixture.vault.id}::Document::${fixture.vault.documents[0]?.id}`
      const res = await call('GET', `/v1/policy/access?resource=${encodeURIComponent(resource)}`, {
        auth: basic(fixture.bootstrap.api_key),
      })
      expect(res.status, res.body).toBe(200)
      const bootstrap = res
        .json()
        .data.items.find((i: { username: string }) => i.username === fixture.bootstrap.username)
      expect(bootstrap).toMatchObject({
        activities: 'CRUD',
        granted_by: [
          expect.objectContaining({
            group_id: admin.id,
            resource_matcher: 'Vault::.*::Document::.*',
          }),
        ],
      })
    })

    it('records the master key fingerprint of every old data key at start (migration 0019 backfill)', async () => {
      const key = MasterKey.fromBase64(
        fixture.masterKey ?? readFileSync(join(dataDir, 'master.key'), 'utf8'),
      )
      const store = openCofferStore(databaseUrl, undefined, { pg: { poolSize: 1 } })
      try {
        const rows = await store.db
          .selectFrom('data_keys')
          .select(['master_key_id', 'master_key_fingerprint'])
          .execute()
        expect(rows.length).toBeGreaterThan(0)
        // the plain-hash legacy id is gone; the HMAC fingerprint names the key
        for (const row of rows) {
          expect(row).toEqual({ master_key_id: key.id, master_key_fingerprint: key.id })
        }
        expect(key.id).not.toBe(key.legacyId)
      } finally {
        await store.close()
      }
      // and the old data still reads through it
      const doc = fixture.vault.documents[0] as { id: string; content: unknown }
      const res = await call('GET', `/v2/vaults/${fixture.vault.id}/documents/${doc.id}`, {
        auth: basic(fixture.bootstrap.api_key),
      })
      expect(res.status, res.body).toBe(200)
    })

    it.runIf(testDialect === 'sqlite')(
      'encrypted the data folder at start: the file is SQLCipher, no value it held is readable in any file (issue 22)',
      async () => {
        expect(server.output()).toContain('encrypted the plaintext database')
        expect(sqliteFileState(databaseUrl)).toBe('encrypted')
        for (const leftover of ['coffer.db.encrypting', 'coffer.db.plaintext'])
          expect(existsSync(join(dataDir, leftover)), leftover).toBe(false)
        const values = [
          fixture.user.username,
          fixture.mfaUser.username,
          fixture.vault.id,
          ...fixture.vault.documents.map((d) => d.id),
          'CREATE TABLE',
        ]
        // Needles of 5 bytes and more: a 3-letter username turns up by chance in a 4 MB WAL of
        // random bytes about one time in four (a CI run met 'bob'); 5 bytes, about 1 in 10^5.
        const needles = values.filter((v) => Buffer.byteLength(v) >= 5)
        expect(needles).toContain(fixture.vault.id)
        const hits: string[] = []
        for (const entry of readdirSync(dataDir, { recursive: true, withFileTypes: true })) {
          if (!entry.isFile()) continue
          const bytes = readFileSync(join(entry.parentPath, entry.name))
          for (const v of needles)
            for (const needle of [Buffer.from(v), Buffer.from(v, 'utf16le')])
              if (bytes.includes(needle)) hits.push(`${v} in ${entry.name}`)
        }
        expect(hits).toEqual([])
      },
    )

    it('does not bootstrap again: one account, the bootstrap row names it', async () => {
      expect(server.output()).not.toContain('created the first account')
      const store = openCofferStore(databaseUrl, undefined, { pg: { poolSize: 1 } })
      try {
        const accounts = await store.db.selectFrom('accounts').select('id').execute()
        expect(accounts.map((a) => a.id)).toEqual([fixture.bootstrap.account_id])
        const rows = await store.db.selectFrom('bootstrap').selectAll().execute()
        expect(rows).toEqual([
          expect.objectContaining({
            id: 'first-account',
            account_id: fixture.bootstrap.account_id,
          }),
        ])
      } finally {
        await store.close()
      }
    })
  })
}
