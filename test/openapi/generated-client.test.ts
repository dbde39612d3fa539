import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import openapiTS, { astToString } from 'openapi-typescript'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createUser } from '../helpers/app.js'
import { startTestServer, type TestServer } from '../helpers/server.js'

/**
 * Issue #17: a client generated from the published `/openapi.json` (openapi-typescript types,
 * openapi-fetch calls) type-checks under `strict` with no cast on any call, and works against a
 * real server: log in, create and read a document, upload and download a BLOB, search. On the
 * document before the fix, the upload's body was typed `never` and the download described as
 * JSON: this program did not compile.
 */

const ROOT = resolve(import.meta.dirname, '../..')
const bin = (name: string) => join(ROOT, 'node_modules/.bin', name)

/** Asynchronous: the program talks to a server in this very process, which must keep serving. */
async function run(file: string, args: string[], cwd: string) {
  try {
    const { stdout, stderr } = await promisify(execFile)(file, args, { cwd, encoding: 'utf8' })
    return { status: 0, stdout, stderr }
  } catch (e) {
    const failed = e as { code?: number; stdout?: string; stderr?: string }
    return { status: failed.code ?? 1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' }
  }
}

/** The program a client author would write, against the generated `paths` only. */
const PROGRAM = `
import createClient from 'openapi-fetch'
import type { paths } from './api.js'

const arg = (i: number): string => process.argv[2 + i] ?? ''
const baseUrl = arg(0)

function fail(step: string, error: unknown): never {
  throw new Error(step + ' failed: ' + JSON.stringify(error))
}
const base64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64')

// The download is described as bytes of any type, not as JSON.
type Download = paths['/v1/vaults/{vault_id}/blobs/{blob_id}']['get']['responses'][200]['content']
const downloadType: keyof Download = '*/*'

const anonymous = createClient<paths>({ baseUrl })
const login = await anonymous.POST('/v1/auth/login', {
  body: { account_id: arg(1), username: arg(2), password: arg(3) },
})
if (!login.data) fail('login', login.error)
const token = login.data.user.access_token ?? fail('login', 'no access token')
const client = createClient<paths>({
  baseUrl,
  headers: { Authorization: 'Basic ' + Buffer.from(token + ':').toString('base64') },
})

const vault = await client.POST('/v1/vaults', { body: { name: 'generated client' } })
if (!vault.data) fail('vault', vault.error)
const vault_id = vault.data.vault.id
const fields = [{ name: 'name', type: 'string', index: true }]
const schema = await client.POST('/v1/vaults/{vault_id}/schemas', {
  params: { path: { vault_id } },
  body: { schema: base64({ name: 'people', fields }) },
})
if (!schema.data) fail('schema', schema.error)
const schema_id = schema.data.schema.id

const created = await client.POST('/v2/vaults/{vault_id}/documents', {
  params: { path: { vault_id } },
  body: { document: { name: 'Ada' }, schema_id },
})
if (!created.data) fail('create', created.error)
const read = await client.GET('/v2/vaults/{vault_id}/documents/{document_id}', {
  params: { path: { vault_id, document_id: created.data.document_id } },
})
if (!read.data) fail('read', read.error)

const uploaded = await client.POST('/v1/vaults/{vault_id}/blobs', {
  params: { path: { vault_id } },
  body: { file: 'hello from a generated client' },
  bodySerializer(body) {
    if (typeof body === 'string') return body
    const form = new FormData()
    form.set('file', new Blob([body.file], { type: 'text/plain' }), 'hello.txt')
    return form
  },
})
if (!uploaded.data) fail('upload', uploaded.error)
const downloaded = await client.GET('/v1/vaults/{vault_id}/blobs/{blob_id}', {
  params: { path: { vault_id, blob_id: uploaded.data.blob_id } },
  parseAs: 'text',
})
if (downloaded.data === undefined) fail('download', downloaded.error)

const found = await client.POST('/v1/vaults/{vault_id}/search', {
  params: { path: { vault_id } },
  body: { search_option: base64({ schema_id, filter: { name: { type: 'eq', value: 'Ada' } } }) },
})
if (!found.data) fail('search', found.error)

// The policy simulator (issue 15): what this user may do on the document, and who may.
const resource = 'Vault::' + vault_id + '::Document::' + created.data.document_id
const explained = await client.POST('/v1/policy/explain', {
  body: { user_id: login.data.user.id, resource },
})
if (!explained.data) fail('explain', explained.error)
const access = await client.GET('/v1/policy/access', { params: { query: { resource } } })
if (!access.data) fail('access', access.error)

console.log(
  JSON.stringify({
    downloadType,
    read: read.data.documents.map((d) => d.document),
    blob: {
      filename: uploaded.data.blob_filename,
      text: downloaded.data,
      type: downloaded.response.headers.get('content-type'),
    },
    hits: found.data.data.documents.map((d) => d.document_id),
    created: created.data.document_id,
    explained: explained.data.explanation.activities.map((a) => a.activity + (a.allowed ? '+' : '-')),
    grantedBy: explained.data.explanation.activities[1]?.granted_by[0]?.resource_matcher,
    access: access.data.data.items.map((i) => i.username + ':' + i.activities),
  }),
)
`

/** What the program does: vaults, and their schemas, documents, BLOBs and searches. */
const VAULT_WORK = [
  'Vault::.*',
  ...['Schema', 'Document', 'Blob', 'Search'].map((k) => `Vault::.*::${k}::.*`),
]

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
    lib: ['ES2022', 'DOM'],
  },
  files: ['client.ts'],
}

describe('a client generated from /openapi.json', () => {
  let server: TestServer
  let dir: string

  beforeAll(async () => {
    server = await startTestServer()
    dir = mkdtempSync(join(tmpdir(), 'coffer-generated-client-'))
    // The program resolves openapi-fetch and @types/node from the project's own packages.
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir')
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }))
  })
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true })
    await server?.close()
  })

  it('type-checks under strict with no casts, and logs in, stores, reads, uploads, downloads, searches and simulates policies', async () => {
    const published = await fetch(`${server.url}/openapi.json`)
    expect(published.status).toBe(200)
    const types = astToString(await openapiTS(await published.text()))
    writeFileSync(join(dir, 'api.d.ts'), types)
    writeFileSync(join(dir, 'client.ts'), PROGRAM)
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG))

    const tsc = await run(bin('tsc'), ['--noEmit', '-p', dir], dir)
    expect(tsc.stdout + tsc.stderr).toBe('')
    expect(tsc.status).toBe(0)

    const user = await createUser(server.testApp, {
      password: 'generated-client-password',
      policy: [
        { Resources: VAULT_WORK, Activities: 'CRUD' },
        { Resources: ['PolicySimulator::'], Activities: 'R' },
      ],
    })
    const args = [server.url, server.admin.account_id, user.username, 'generated-client-password']
    const client = await run(process.execPath, ['--import', 'tsx', 'client.ts', ...args], dir)
    expect(client.stderr).toBe('')
    expect(client.status).toBe(0)
    const out = JSON.parse(client.stdout)
    expect(out.downloadType).toBe('*/*')
    expect(out.read).toEqual([{ name: 'Ada' }])
    expect(out.blob).toEqual({
      filename: 'hello.txt',
      text: 'hello from a generated client',
      type: 'text/plain',
    })
    expect(out.hits).toEqual([out.created])
    expect(out.explained).toEqual(['C+', 'R+', 'U+', 'D+'])
    expect(out.grantedBy).toBe('Vault::.*::Document::.*')
    expect(out.access).toContain(`${user.username}:CRUD`)
  }, 120_000)
})
