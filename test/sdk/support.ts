import { randomUUID } from 'node:crypto'
import type TrueVaultClient from 'truevault'
import { expect } from 'vitest'

export { type Sdk, sdkFor, TRANSPORTS, type Transport } from './transports.js'

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
