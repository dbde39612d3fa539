import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { OPERATIONS } from '../../src/access/operations.js'
import { buildConsentApp } from '../../src/consent-app.js'
import { type OpenApiDocument, operationsOf } from '../../src/http/openapi/document.js'
import { erasedPath, templateNames } from '../../src/http/openapi/path-params.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * Issue #17: the published documents are contracts generated clients can use. These checks
 * read the documents as served, so every route any module adds is held to them.
 */
const PACKAGE = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))

let t: TestApp
let main: OpenApiDocument
let consent: OpenApiDocument
let consentApp: Awaited<ReturnType<typeof buildConsentApp>>

beforeAll(async () => {
  t = await buildTestApp()
  main = (await t.api.get('/openapi.json')).json()
  consentApp = await buildConsentApp(t.deps)
  const res = await consentApp.inject('/openapi.json')
  expect(res.statusCode, res.body).toBe(200)
  consent = res.json()
})
afterAll(async () => {
  await consentApp.close()
  await t.close()
})

const documents = () =>
  [
    ['main', main],
    ['consent', consent],
  ] as const

/** Every `$ref` string anywhere in a value. */
function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) refsIn(v, found)
  else if (value && typeof value === 'object') {
    for (const [key, v] of Object.entries(value)) {
      if (key === '$ref' && typeof v === 'string') found.push(v)
      else refsIn(v, found)
    }
  }
  return found
}

describe.each(['main', 'consent'] as const)('the %s document', (which) => {
  const doc = () => (which === 'main' ? main : consent)

  it('names every operation: a unique camelCase operationId', () => {
    const ids = operationsOf(doc()).map(([path, method, op]) => {
      expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][A-Za-z0-9]*$/)
      return op.operationId
    })
    const repeated = ids.filter((id, i) => ids.indexOf(id) !== i)
    expect(repeated).toEqual([])
  })

  it('tags every operation with one declared, described tag', () => {
    const declared = new Map((doc().tags ?? []).map((tag) => [tag.name, tag.description]))
    for (const [path, method, op] of operationsOf(doc())) {
      expect(op.tags, `${method} ${path}`).toHaveLength(1)
      const tag = op.tags?.[0] as string
      expect(declared.get(tag), `tag ${tag} of ${method} ${path}`).toMatch(/\w/)
    }
  })

  it('has no two paths that differ only in template names, and each template is a parameter', () => {
    const byShape = new Map<string, string[]>()
    for (const path of Object.keys(doc().paths)) {
      byShape.set(erasedPath(path), [...(byShape.get(erasedPath(path)) ?? []), path])
    }
    expect([...byShape.values()].filter((paths) => paths.length > 1)).toEqual([])
    for (const [path, method, op] of operationsOf(doc())) {
      const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name)
      expect(declared.sort(), `${method} ${path}`).toEqual(templateNames(path).sort())
    }
  })

  it('carries the package version and licence, a relative server and readable component names', () => {
    const d = doc() as OpenApiDocument & {
      info: { version: string; license: { name: string; identifier: string } }
      servers: { url: string }[]
    }
    expect(d.openapi).toBe('3.1.0')
    expect(d.info.version).toBe(PACKAGE.version)
    expect(d.info.license).toEqual({ name: PACKAGE.license, identifier: PACKAGE.license })
    expect(d.servers).toEqual([{ url: '/' }])
    const schemas = Object.keys(d.components?.schemas ?? {})
    for (const name of schemas) expect(name).toMatch(/^[A-Z][A-Za-z0-9]*$/)
    for (const ref of refsIn(d)) {
      expect(ref).toMatch(/^#\/components\/schemas\//)
      expect(schemas, ref).toContain(ref.slice('#/components/schemas/'.length))
    }
  })
})

describe('names', () => {
  it('the shared error body is the ErrorEnvelope component, which every error response uses', () => {
    expect(main.components?.schemas?.ErrorEnvelope).toMatchObject({ title: 'ErrorEnvelope' })
    const errorRef = { $ref: '#/components/schemas/ErrorEnvelope' }
    for (const [path, method, op] of operationsOf(main)) {
      const responses = Object.entries(op.responses as Record<string, { content?: object }>)
      const errors = responses.filter(([status]) => /^[45]/.test(status))
      expect(errors.length, `${method} ${path}`).toBeGreaterThan(0)
      for (const [status, response] of errors) {
        expect(response.content, `${method} ${path} ${status}`).toEqual({
          'application/json': { schema: errorRef },
        })
      }
    }
  })

  it('the catalog has no OpenAPI name that names no operation', () => {
    const named = new Set(
      documents().flatMap(([, d]) => operationsOf(d).map(([, , op]) => op.operationId)),
    )
    const stale = Object.entries(OPERATIONS).filter(
      ([, spec]) => spec.openapi !== undefined && !named.has(spec.openapi),
    )
    expect(stale).toEqual([])
  })

  it('the main document lists the sample names the issue asks for', () => {
    const ids = operationsOf(main).map(([, , op]) => op.operationId)
    expect(ids).toEqual(
      expect.arrayContaining(['createVault', 'readDocuments', 'uploadBlob', 'login']),
    )
  })
})

describe('paths', () => {
  it('one list-or-item position has one name; the list form is described', () => {
    const item = main.paths['/v1/vaults/{vault_id}/documents/{document_id}']
    expect(Object.keys(item ?? {}).sort()).toEqual(['delete', 'get', 'put'])
    const listParam = item?.get?.parameters?.find((p) => p.name === 'document_id')
    expect(listParam?.description).toMatch(/comma-separated/)
    expect(main.paths['/v1/vaults/{vault_id}/documents/{document_ids}']).toBeUndefined()
  })

  it('the only trailing-slash path is the legacy search alias (redocly.yaml)', () => {
    const slashed = Object.keys(main.paths).filter((p) => p.length > 1 && p.endsWith('/'))
    expect(slashed).toEqual(['/v1/vaults/{vault_id}/'])
  })
})

describe('the consent listener’s document', () => {
  it('is served without a credential, outside any envelope, uncached like every consent answer', async () => {
    const res = await consentApp.inject('/openapi.json')
    expect(res.headers['content-type']).toMatch(/^application\/json/)
    expect(res.headers['cache-control']).toBe('no-store')
    expect(res.json()).not.toHaveProperty('result')
  })

  it('describes the consent API only, under its own title', () => {
    expect((consent.info as { title: string }).title).toBe('Coffer consent API')
    expect(Object.keys(consent.paths)).toEqual(['/api/v1/cmp/consent'])
    expect(operationsOf(consent).map(([, m, op]) => `${m} ${op.operationId}`)).toEqual([
      'get readConsent',
      'post updateConsent',
    ])
    expect(Object.keys(main.paths).filter((p) => p.includes('/cmp/'))).toEqual([])
  })

  it('says a request is signed by the storefront proxy or anonymous', () => {
    const schemes = consent.components?.securitySchemes as Record<string, Record<string, string>>
    expect(schemes).toEqual({
      StorefrontSignature: expect.objectContaining({
        type: 'apiKey',
        in: 'query',
        name: 'signature',
      }),
    })
    for (const [, , op] of operationsOf(consent)) {
      expect(op.security).toEqual([{ StorefrontSignature: [] }, {}])
    }
  })

  it('serves no documentation page (the main listener does)', async () => {
    expect((await consentApp.inject('/docs')).statusCode).toBe(404)
    expect((await consentApp.inject('/docs/')).statusCode).toBe(404)
    expect((await t.api.get('/docs/')).statusCode).toBe(200)
  })
})
