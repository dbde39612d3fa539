import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/app.js'
import { buildConsentApp } from '../../src/consent-app.js'
import type { Access } from '../../src/http/access.js'
import { buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * Issue #20: every route names its operation of the catalog (src/access/operations.ts) beside its
 * access rule, and a route that names none, or one the catalog lacks, stops the server from
 * starting, on both listeners.
 */
let t: TestApp
beforeAll(async () => {
  t = await buildTestApp()
})
afterAll(() => t.close())

const handler = async () => ({})

const SELF: Access = { self: true }
const PUBLIC: Access = { public: true }

describe.each([
  ['main', () => buildApp(t.deps), SELF],
  ['consent', () => buildConsentApp(t.deps), PUBLIC],
] as const)('the %s app', (_name, build, access) => {
  it('refuses to register a route that names no operation', async () => {
    const app = await build()
    try {
      expect(() => app.get('/v1/unnamed', { config: { access } }, handler)).toThrow(
        /GET \/v1\/unnamed declares no operation of the catalog/,
      )
    } finally {
      await app.close()
    }
  })

  it('refuses to register a route whose operation the catalog lacks', async () => {
    const app = await build()
    const config = { access, operation: 'document.steal' } as unknown as { access: Access }
    try {
      expect(() => app.get('/v1/unknown', { config }, handler)).toThrow(
        /declares no operation of the catalog/,
      )
    } finally {
      await app.close()
    }
  })
})
