import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, errorOf, type TestApp } from '../helpers/app.js'

/**
 * Issue #17: what the document marks `required` is exactly what the server refuses when absent.
 * For every documented request body with required fields, each one is left out in turn (the
 * others present) and the answer must be the 400 that names it, as the services always did.
 */

type Schema = { required?: string[]; properties?: Record<string, unknown> }
type Operation = { requestBody?: { content: Record<string, { schema: Schema }> } }

const FORM = 'application/x-www-form-urlencoded'
const JSON_TYPE = 'application/json'
const SOME_ID = '0b9f6c1e-2d0a-4b8e-9a57-3c1d2e4f5a6b'

interface Case {
  method: string
  path: string
  mediaType: string
  required: string[]
}

/** Operations whose form (else JSON) body has required fields. */
function casesOf(doc: { paths: Record<string, Record<string, Operation>> }): Case[] {
  const cases: Case[] = []
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const content = operation.requestBody?.content ?? {}
      const mediaType = content[FORM] ? FORM : content[JSON_TYPE] ? JSON_TYPE : undefined
      const required = mediaType ? (content[mediaType]?.schema.required ?? []) : []
      if (mediaType && required.length > 0) cases.push({ method, path, mediaType, required })
    }
  }
  return cases
}

describe('required fields of the document', () => {
  let t: TestApp
  let cases: Case[]

  beforeAll(async () => {
    t = await buildTestApp()
    cases = casesOf((await t.api.get('/openapi.json')).json())
  })
  afterAll(() => t.close())

  it('covers the routes that need a field (login, creates, owners, schemas, search…)', () => {
    const names = cases.map((c) => `${c.method.toUpperCase()} ${c.path}`)
    expect(names).toEqual(
      expect.arrayContaining([
        'POST /v1/auth/login',
        'POST /v1/users',
        'POST /v1/vaults',
        'POST /v1/vaults/{vault_id}/documents',
        'PUT /v1/vaults/{vault_id}/blobs/{blob_id}/owner',
        'POST /v1/vaults/{vault_id}/search',
        'POST /v1/scoped_access_tokens',
        'POST /v1/password_reset_flows',
      ]),
    )
    expect(cases.length).toBeGreaterThanOrEqual(25)
  })

  it('refuses a body without each required field with 400 naming it', async () => {
    const misses: string[] = []
    for (const c of cases) {
      const url = c.path.replace(/\{[a-z_]+\}/g, SOME_ID)
      for (const missing of c.required) {
        const body: Record<string, string> = {}
        for (const field of c.required) if (field !== missing) body[field] = 'x'
        const res = await t.api.call(c.method.toUpperCase() as 'POST', url, {
          auth: t.admin.api_key,
          ...(c.mediaType === FORM ? { form: body } : { json: body }),
        })
        const message = res.statusCode === 400 ? errorOf(res).message : res.body
        if (res.statusCode !== 400 || !message.startsWith(`${missing} is required`))
          misses.push(`${c.method} ${c.path} without ${missing}: ${res.statusCode} ${message}`)
      }
    }
    expect(misses).toEqual([])
  })
})
