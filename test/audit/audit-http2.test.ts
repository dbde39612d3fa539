import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadTlsMaterial } from '../../src/http/tls-material.js'
import { b64 } from '../helpers/app.js'
import { startTestServer, type TestServer } from '../helpers/server.js'
import { basic, h2Connect, h2Request } from '../helpers/tls-clients.js'
import { makeTestPki, type TestPki } from '../helpers/tls-pki.js'

/**
 * The audit trail over HTTP/2 (native TLS, issue 19): requests on h2 streams are audited like
 * any other, and a streamed download the trail cannot record is refused 503 without its bytes.
 */
let pki: TestPki
let server: TestServer
beforeAll(async () => {
  pki = makeTestPki()
  server = await startTestServer({
    tls: await loadTlsMaterial({
      certFile: pki.leaf.certFile,
      keyFile: pki.leaf.keyFile,
      certSetting: 'COFFER_TLS_CERT_FILE',
      keySetting: 'COFFER_TLS_KEY_FILE',
    }),
  })
})
afterAll(async () => {
  await server?.close()
  pki?.close()
})

describe('audit over HTTP/2', () => {
  it('audits h2 requests once each, and refuses 503 when the event cannot be stored', async () => {
    const db = server.testApp.deps.store.db
    const session = await h2Connect(pki, server.url)
    try {
      const authorization = basic(server.admin.api_key)
      const vault = await h2Request(session, '/v1/vaults', {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ name: 'h2' }).toString(),
      })
      expect(vault.status).toBe(200)
      const vaultId = JSON.parse(vault.body.toString()).vault.id
      const doc = await h2Request(session, `/v1/vaults/${vaultId}/documents`, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ document: b64({ h2: true }) }).toString(),
      })
      expect(doc.status).toBe(200)
      const docId = JSON.parse(doc.body.toString()).document_id
      const read = await h2Request(session, `/v1/vaults/${vaultId}/documents/${docId}`, {
        headers: { authorization },
      })
      expect(read.status).toBe(200)
      const events = await db
        .selectFrom('audit_events')
        .selectAll()
        .where('operation', 'in', ['vault.create', 'document.create', 'document.read'])
        .execute()
      expect(events.map((e) => e.operation).sort()).toEqual([
        'document.create',
        'document.read',
        'vault.create',
      ])

      // The trail refuses: the read is answered 503 on its stream, the session lives on.
      if (server.testApp.deps.store.dialect === 'sqlite') {
        await sql`create trigger audit_refuse before insert on audit_events begin select raise(abort, 'refused'); end`.execute(
          db,
        )
      } else {
        await sql`create or replace function audit_refuse() returns trigger language plpgsql as $$ begin raise exception 'refused'; end $$`.execute(
          db,
        )
        await sql`create trigger audit_refuse before insert on audit_events for each row execute function audit_refuse()`.execute(
          db,
        )
      }
      const refused = await h2Request(session, `/v1/vaults/${vaultId}/documents/${docId}`, {
        headers: { authorization },
      })
      expect(refused.status).toBe(503)
      expect(JSON.parse(refused.body.toString()).error.code).toBe('AUDIT_UNAVAILABLE')
      expect(refused.body.toString()).not.toContain(b64({ h2: true }))
      if (server.testApp.deps.store.dialect === 'sqlite')
        await sql`drop trigger audit_refuse`.execute(db)
      else await sql`drop trigger audit_refuse on audit_events`.execute(db)
      const again = await h2Request(session, `/v1/vaults/${vaultId}/documents/${docId}`, {
        headers: { authorization },
      })
      expect(again.status).toBe(200)
    } finally {
      session.close()
    }
  })
})
