import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { sqliteFileState } from '../src/store/sqlite-cipher.js'
import { basicHeader } from './helpers/app.js'
import {
  bootstrapCredentials,
  type ServerProcess,
  startServerProcess,
} from './helpers/processes.js'
import { testDialect } from './helpers/store.js'

/**
 * Issue 22's "done when" for the embedded database: after values are written through the API
 * of a real `coffer serve` — indexed fields, usernames, vault, group and schema names, and the
 * audit events those writes leave (ids of what they touched) — no file under the data folder
 * (database, WAL, shm, the file-key file, the key file, BLOB objects) holds any of them in UTF-8,
 * UTF-16LE or UTF-16BE, as hex (either case) or as base64 at any of its three alignments. Scanned
 * while serving, with the newest pages in a WAL not yet checkpointed, and again after the stop.
 */
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64')
const tag = (label: string) => `${label}-${randomBytes(10).toString('hex')}`

function needles(value: string): Buffer[] {
  const utf8 = Buffer.from(value)
  const be = Buffer.from(value, 'utf16le').swap16()
  const out = [utf8, Buffer.from(value, 'utf16le'), be]
  out.push(Buffer.from(utf8.toString('hex')), Buffer.from(utf8.toString('hex').toUpperCase()))
  for (let k = 0; k < 3; k++) {
    const full = Buffer.from(`${'x'.repeat(k)}${value}`).toString('base64')
    // without the groups that also encode neighbouring bytes
    out.push(Buffer.from(full.slice(k === 0 ? 0 : 4, full.length - 4)))
  }
  return out
}

function scanFolder(dir: string, values: string[]): { hits: string[]; files: string[] } {
  const hits: string[] = []
  const files: string[] = []
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    files.push(path)
    const bytes = readFileSync(path)
    for (const value of values)
      for (const needle of needles(value))
        if (bytes.includes(needle)) hits.push(`${value} (${needle.toString('latin1')}) in ${path}`)
  }
  return { hits, files }
}

describe.skipIf(testDialect !== 'sqlite')(
  'nothing written through the API is readable in the data folder',
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'coffer-at-rest-'))
    let server: ServerProcess | undefined
    afterAll(async () => {
      await server?.stop()
      rmSync(dir, { recursive: true, force: true })
    })

    it('in the database, its WAL (not checkpointed), shm, key files and BLOBs; serving and stopped', async () => {
      server = await startServerProcess({ COFFER_DATA_DIR: dir })
      const admin = bootstrapCredentials(dir)
      const call = async (method: string, path: string, form?: Record<string, string>) => {
        const res = await fetch(`${server?.url}${path}`, {
          method,
          headers: {
            authorization: basicHeader(admin.api_key),
            ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
          },
          ...(form ? { body: new URLSearchParams(form).toString() } : {}),
        })
        const text = await res.text()
        expect(res.status, `${method} ${path}: ${text}`).toBe(200)
        return JSON.parse(text)
      }
      const values: string[] = []
      const keep = <T extends string>(v: T) => {
        values.push(v)
        return v
      }

      const vaultName = keep(tag('vaultname'))
      const vault = (await call('POST', '/v1/vaults', { name: vaultName })).vault.id as string
      const field = keep(`field${randomBytes(6).toString('hex')}`)
      const schema = (
        await call('POST', `/v1/vaults/${vault}/schemas`, {
          schema: b64({
            name: keep(tag('schemaname')),
            fields: [{ name: field, type: 'string', index: true }],
          }),
        })
      ).schema.id as string
      const indexed: string[] = []
      const docs: string[] = []
      for (let i = 0; i < 20; i++) {
        const value = keep(tag('indexed'))
        indexed.push(value)
        const created = await call('POST', `/v1/vaults/${vault}/documents`, {
          document: b64({ [field]: value, note: keep(tag('content')) }),
          schema_id: schema,
        })
        docs.push(keep(created.document_id as string))
      }
      const users: string[] = []
      for (let i = 0; i < 5; i++) {
        const username = keep(tag('username'))
        const created = await call('POST', '/v1/users', {
          username,
          attributes: b64({ ssn: keep(tag('attribute')) }),
        })
        users.push(keep(created.user.id as string))
      }
      const group = await call('POST', '/v1/groups', {
        name: keep(tag('groupname')),
        policy: b64([]),
        user_ids: users.join(','),
      })
      keep(group.group.id as string)
      keep(vault)
      keep(schema)
      // a BLOB: its content (an encrypted object) and its file name (a database column)
      const form = new FormData()
      form.append(
        'file',
        new Blob([keep(tag('blobcontent')).repeat(50)]),
        keep(`${tag('file')}.txt`),
      )
      const upload = await fetch(`${server.url}/v1/vaults/${vault}/blobs`, {
        method: 'POST',
        headers: { authorization: basicHeader(admin.api_key) },
        body: form,
      })
      const uploaded = await upload.text()
      expect(upload.status, uploaded).toBe(200)
      keep(JSON.parse(uploaded).blob_id as string)

      // written, not lost: a search on the indexed field (a read worker) finds the document
      const found = await call('POST', `/v1/vaults/${vault}/search`, {
        search_option: b64({
          filter: { [field]: { type: 'eq', value: indexed[3] } },
          schema_id: schema,
        }),
      })
      expect(found.data.documents.map((d: { document_id: string }) => d.document_id)).toEqual([
        docs[3],
      ])
      // and the writes are in the trail
      const trail = await call('GET', `/v1/audit_events?operation=document.create`)
      expect(trail.data.items.length).toBeGreaterThan(0)

      const db = join(dir, 'coffer.db')
      expect(sqliteFileState(db)).toBe('encrypted')
      // serving: the newest pages are in a WAL that has not been checkpointed
      expect(statSync(`${db}-wal`).size).toBeGreaterThan(0)
      const serving = scanFolder(dir, values)
      expect(serving.files).toEqual(
        expect.arrayContaining([
          db,
          `${db}-wal`,
          `${db}-shm`,
          `${db}.filekey.json`,
          join(dir, 'master.key'),
        ]),
      )
      expect(serving.files.filter((f) => f.startsWith(join(dir, 'blobs')))).toHaveLength(1)
      expect(serving.hits).toEqual([])

      await server.stop()
      server = undefined
      const stopped = scanFolder(dir, values)
      expect(stopped.files).toContain(db)
      expect(stopped.hits).toEqual([])
      // the scan can see: the same values, written in clear beside them, are found
      const control = join(dir, 'control.txt')
      writeFileSync(control, Buffer.from(values.join('\n'), 'utf16le').swap16())
      const seen = new Set(scanFolder(dir, values).hits.map((h) => h.split(' ')[0]))
      expect(seen.size).toBe(values.length)
    }, 180_000)
  },
)
