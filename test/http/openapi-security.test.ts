import { randomUUID } from 'node:crypto'
import type { FastifyInstance, LightMyRequestResponse, RouteOptions } from 'fastify'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { CredentialKind } from '../../src/access/principal.js'
import { type OpenApiDocument, operationsOf } from '../../src/http/openapi/document.js'
import { erasedPath } from '../../src/http/openapi/path-params.js'
import { SCHEME_OF_KIND } from '../../src/http/openapi/security.js'
import { FULL_ACCESS_POLICY } from '../../src/modules/accounts/accounts.service.js'
import { basicHeader, buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * The document's `security` of every operation agrees with what the server enforces: each
 * operation is called with no credential and with each kind, and the auth hooks' answer
 * (refused before any input is read, or let through to validation and the handler) must match
 * the kinds the document lists. A route whose access rule changes without the document
 * following, or the other way round, fails here.
 */
/** Every route the app registers, seen by a hook on each Fastify instance this file creates. */
const registered = vi.hoisted(() => [] as RouteOptions[])
vi.mock('fastify', async (importOriginal) => {
  const actual = await importOriginal<typeof import('fastify')>()
  const build = actual.default as unknown as (options?: unknown) => FastifyInstance
  const create = (options?: unknown) => {
    const app = build(options)
    app.addHook('onRoute', (route) => {
      registered.push(route)
    })
    return app
  }
  return { ...actual, default: create }
})

let t: TestApp
let doc: OpenApiDocument
let sat: { username: string; password: string }

const KINDS: CredentialKind[] = ['api_key', 'access_token', 'sat']
/** The codes of a refusal by the auth hooks (access.ts, auth-hooks.ts). */
const MISSING = ['UNAUTHENTICATED', 'INVALID_AUTHORIZATION']
const WRONG_KIND = ['CREDENTIAL_NOT_ALLOWED', 'INVALID_AUTHORIZATION']

beforeAll(async () => {
  t = await buildTestApp()
  doc = (await t.api.get('/openapi.json')).json()
  const res = await t.api.post('/v1/scoped_access_tokens', {
    auth: t.admin.api_key,
    json: {
      name: 'every route',
      policy: FULL_ACCESS_POLICY,
      not_valid_after: new Date(Date.now() + 3_600_000).toISOString(),
    },
  })
  expect(res.statusCode, res.body).toBe(200)
  sat = res.json().scoped_access_token.http_auth
})
afterAll(() => t.close())

/** A fresh credential each call: some routes end the access token they are called with. */
async function authorization(kind: CredentialKind): Promise<string> {
  if (kind === 'api_key') return basicHeader(t.admin.api_key)
  if (kind === 'sat') return basicHeader(sat.username, sat.password)
  const token = await t.deps.credentials.issueAccessToken(
    t.deps.store.db,
    t.admin.account_id,
    t.admin.userId,
  )
  return basicHeader(token)
}

/**
 * Any id will do: credentials are checked before the path is read. `search_option` lets the
 * legacy search GET match its route (its constraint); other routes ignore or refuse it later.
 */
const urlOf = (path: string) => `${path.replace(/\{\w+\}/g, () => randomUUID())}?search_option=e30=`

function refusalCode(res: LightMyRequestResponse): string | undefined {
  if (res.statusCode !== 400 && res.statusCode !== 401) return undefined
  try {
    return res.json().error?.code
  } catch {
    return undefined
  }
}

const operations = () =>
  operationsOf(doc).map(([path, method, op]) => ({ path, method, security: op.security }))

describe('security in the OpenAPI document', () => {
  it('documents every route of the app; what it hides is public or another path to a documented operation', () => {
    const documented = new Set(operations().map((op) => `${op.method} ${erasedPath(op.path)}`))
    const missing: string[] = []
    for (const route of registered) {
      const path = erasedPath(route.url.replace(/:(\w+)/g, '{$1}'))
      for (const method of [route.method].flat().map((m) => m.toLowerCase())) {
        if (method === 'head') continue
        const key = `${method} ${path}`
        const access = route.config?.access
        const hiddenPublic = route.schema?.hide === true && access && 'public' in access
        if (!documented.has(key) && !hiddenPublic) missing.push(key)
      }
    }
    expect(registered.length).toBeGreaterThan(70)
    expect(missing).toEqual([])
    expect(operations().filter((op) => op.security === undefined)).toEqual([])
  })

  it('public operations are let through without a credential; the others refuse one missing', async () => {
    const wrong: string[] = []
    for (const { path, method, security } of operations()) {
      const res = await t.app.inject({ method: method.toUpperCase() as 'GET', url: urlOf(path) })
      const refused = MISSING.includes(refusalCode(res) ?? '')
      if (refused !== (security?.length ?? 0) > 0) {
        wrong.push(`${method} ${path}: documented ${JSON.stringify(security)}, got ${res.body}`)
      }
    }
    expect(wrong).toEqual([])
  })

  it('every credential kind is accepted exactly where the document lists it', async () => {
    const wrong: string[] = []
    for (const { path, method, security } of operations()) {
      if (!security || security.length === 0) continue
      const listed = security.flatMap((alternative) => Object.keys(alternative))
      for (const kind of KINDS) {
        const res = await t.app.inject({
          method: method.toUpperCase() as 'GET',
          url: urlOf(path),
          headers: { authorization: await authorization(kind) },
        })
        const refused = WRONG_KIND.includes(refusalCode(res) ?? '')
        if (refused === listed.includes(SCHEME_OF_KIND[kind])) {
          wrong.push(`${method} ${path} ${kind}: documented ${listed}, got ${res.body}`)
        }
      }
    }
    expect(wrong).toEqual([])
  })

  it('each operation lists each kind at most once, as its own alternative', () => {
    for (const { path, method, security } of operations()) {
      for (const alternative of security ?? []) {
        expect(Object.keys(alternative), `${method} ${path}`).toHaveLength(1)
      }
      const names = (security ?? []).map((a) => Object.keys(a)[0])
      expect(new Set(names).size, `${method} ${path}`).toBe(names.length)
    }
  })

  it('defines one HTTP Basic scheme per credential kind, each described', () => {
    const schemes = doc.components?.securitySchemes as Record<string, Record<string, string>>
    expect(Object.keys(schemes).sort()).toEqual(Object.values(SCHEME_OF_KIND).sort())
    for (const scheme of Object.values(schemes)) {
      expect(scheme).toMatchObject({ type: 'http', scheme: 'basic' })
      expect(scheme.description).toMatch(/user name/)
    }
    expect(doc.security).toBeUndefined()
  })

  it('login is public; API-key-only routes say so', () => {
    expect(doc.paths['/v1/auth/login']?.post?.security).toEqual([])
    expect(doc.paths['/v1/users/{user_id}/api_key']?.post?.security).toEqual([{ ApiKey: [] }])
    expect(doc.paths['/v1/auth/logout']?.post?.security).toEqual([{ AccessToken: [] }])
  })
})
