import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import TrueVaultClient from 'truevault'
import { expect } from 'vitest'

/**
 * The SDK picks its HTTP stack once, at load: the global `fetch`/`FormData` when they exist
 * (Node 18+, browsers), else its bundled node-fetch 2 + form-data (older Node, where its own suite
 * ran). Each suite runs against both, since they frame multipart bodies differently.
 */
export const TRANSPORTS = ['global fetch', 'node-fetch + form-data'] as const
export type Transport = (typeof TRANSPORTS)[number]

export type Sdk = typeof TrueVaultClient

const require = createRequire(import.meta.url)
let legacySdk: Sdk | undefined

export function sdkFor(transport: Transport): Sdk {
  if (transport === 'global fetch') return TrueVaultClient
  legacySdk ??= loadWithoutGlobalFetch()
  return legacySdk
}

/**
 * A second copy of the SDK module, loaded while `fetch` and `FormData` are hidden (and the flag by
 * which its bundled babel-polyfill refuses to load twice).
 */
function loadWithoutGlobalFetch(): Sdk {
  const path = require.resolve('truevault')
  const names = ['fetch', 'FormData', '_babelPolyfill'] as const
  const saved = names.map((n) => Object.getOwnPropertyDescriptor(globalThis, n))
  const cached = require.cache[path]
  delete require.cache[path]
  try {
    for (const n of names)
      Object.defineProperty(globalThis, n, { value: undefined, configurable: true, writable: true })
    return require('truevault') as Sdk
  } finally {
    names.forEach((n, i) => {
      const d = saved[i]
      if (d) Object.defineProperty(globalThis, n, d)
      else Reflect.deleteProperty(globalThis, n)
    })
    if (cached) require.cache[path] = cached
    else delete require.cache[path]
  }
}

/** What Ajv 6 `format: uuid` accepts (the SDK suite's uuid check). */
export const UUID = /^(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$/i

/** Unique names as the SDK suite makes them (`js_integration_test_<uuid>`). */
export const uniqueName = () => `sdk_${randomUUID()}`

/** Awaits a call that must fail and returns what the SDK threw. */
export async function sdkError(call: Promise<unknown>): Promise<TrueVaultClient.ApiError> {
  try {
    await call
  } catch (e) {
    return e as TrueVaultClient.ApiError
  }
  throw new Error('expected the SDK call to throw')
}

/** The SDK suite's error check: string code, message and type, and a UUID transaction id. */
export function expectApiError(e: TrueVaultClient.ApiError): void {
  expect(e).toBeInstanceOf(Error)
  expect(e.message).not.toMatch(/^non-JSON response/)
  expect(typeof e.error?.code).toBe('string')
  expect(typeof e.error?.message).toBe('string')
  expect(typeof e.error?.type).toBe('string')
  expect(e.message).toBe(e.error.message)
  expect(e.transaction_id).toMatch(UUID)
}

/** The SDK suite's user schema: required account_id, id, status, username, mfa_enrolled. */
export function expectUserShape(user: TrueVaultClient.User): void {
  expect(user.account_id).toMatch(UUID)
  expect(user.id).toMatch(UUID)
  expect(typeof user.status).toBe('string')
  expect(typeof user.username).toBe('string')
  expect(typeof user.mfa_enrolled).toBe('boolean')
  if ('attributes' in user) expect(typeof user.attributes).toBe('object')
}

/** The SDK suite's group schema (types only), tightened: id, name and policy are required here. */
export function expectGroupShape(group: TrueVaultClient.Group): void {
  expect(group.id).toMatch(UUID)
  expect(typeof group.name).toBe('string')
  expect(Array.isArray(group.policy)).toBe(true)
  for (const statement of group.policy) {
    expect(typeof statement.Activities).toBe('string')
    expect(Array.isArray(statement.Resources)).toBe(true)
    for (const r of statement.Resources) expect(typeof r).toBe('string')
  }
  if ('user_ids' in group) {
    expect(Array.isArray(group.user_ids)).toBe(true)
    for (const id of group.user_ids ?? []) expect(id).toMatch(UUID)
  }
}
