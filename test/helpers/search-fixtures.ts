import type { LightMyRequestResponse } from 'fastify'
import { expect } from 'vitest'
import {
  indexValues,
  parseDate,
  type SchemaField,
  USER_SYSTEM_FIELDS,
} from '../../src/indexing/index-values.js'
import { newId } from '../../src/lib/ids.js'
import { b64, type TestApp } from './app.js'

/**
 * Search fixtures written straight to the store: schemas, documents (content sealed as the
 * documents service seals it) and their `search_index` rows, so search tests do not depend on
 * the write path's index maintenance.
 */

export interface TestSchema {
  id: string
  fields: SchemaField[]
}

export async function insertSchema(
  t: TestApp,
  accountId: string,
  vaultId: string,
  fields: SchemaField[],
): Promise<TestSchema> {
  const now = new Date().toISOString()
  const id = newId()
  await t.deps.store.db
    .insertInto('schemas')
    .values({
      account_id: accountId,
      vault_id: vaultId,
      id,
      name: `s-${id}`,
      fields: JSON.stringify(fields),
      created_at: now,
      updated_at: now,
    })
    .execute()
  return { id, fields }
}

async function replaceIndex(
  t: TestApp,
  accountId: string,
  schemaId: string,
  docId: string,
  rows: ReturnType<typeof indexValues>,
) {
  const db = t.deps.store.db
  await db
    .deleteFrom('search_index')
    .where('account_id', '=', accountId)
    .where('doc_id', '=', docId)
    .execute()
  if (rows.length === 0) return
  await db
    .insertInto('search_index')
    .values(rows.map((r) => ({ account_id: accountId, schema_id: schemaId, doc_id: docId, ...r })))
    .execute()
}

/** A document tied to the schema, with its index rows. Ids ascend in creation order. */
export async function insertDocument(
  t: TestApp,
  o: { accountId: string; vaultId: string; schema: TestSchema; content: unknown; ownerId?: string },
): Promise<string> {
  const id = newId()
  const now = new Date().toISOString()
  const sealed = await t.deps.keyring.encrypt(
    o.accountId,
    JSON.stringify(o.content),
    `document\n${o.vaultId}\n${id}`,
  )
  await t.deps.store.db
    .insertInto('documents')
    .values({
      account_id: o.accountId,
      vault_id: o.vaultId,
      id,
      owner_id: o.ownerId ?? null,
      schema_id: o.schema.id,
      schema_bound: 1,
      content: sealed,
      created_at: now,
      updated_at: now,
    })
    .execute()
  await replaceIndex(t, o.accountId, o.schema.id, id, indexValues(o.schema.fields, o.content))
  return id
}

/** Sets the account's user schema fields (creating it if needed); returns its id. */
export async function setUserSchema(
  t: TestApp,
  accountId: string,
  fields: SchemaField[],
): Promise<string> {
  const db = t.deps.store.db
  const now = new Date().toISOString()
  const found = await db
    .selectFrom('user_schemas')
    .select('id')
    .where('account_id', '=', accountId)
    .executeTakeFirst()
  if (found) {
    await db
      .updateTable('user_schemas')
      .set({ fields: JSON.stringify(fields), updated_at: now })
      .where('account_id', '=', accountId)
      .execute()
    return found.id
  }
  const id = newId()
  await db
    .insertInto('user_schemas')
    .values({
      account_id: accountId,
      id,
      name: 'user_schema',
      fields: JSON.stringify(fields),
      created_at: now,
      updated_at: now,
    })
    .execute()
  return id
}

/**
 * Indexes a user as the write path does: attributes under the user schema plus the system
 * fields; a user whose attributes are JSON null gets no rows (not searchable).
 */
export async function indexUser(
  t: TestApp,
  accountId: string,
  schema: TestSchema,
  userId: string,
  attributes: unknown,
): Promise<void> {
  const row = await t.deps.store.db
    .selectFrom('users')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', userId)
    .executeTakeFirstOrThrow()
  if (attributes === null) {
    await replaceIndex(t, accountId, schema.id, userId, [])
    return
  }
  const system = indexValues(USER_SYSTEM_FIELDS, {
    $sys: {
      id: row.id,
      username: row.username,
      status: row.status,
      created_at: parseDate(row.created_at),
    },
  })
  const rows = [...indexValues(schema.fields, attributes), ...system]
  await replaceIndex(t, accountId, schema.id, userId, rows)
}

export interface SearchData<T> {
  documents: T[]
  info: { per_page: number; current_page: number; num_pages: number; total_result_count: number }
}

/** The `data` of a successful search answer. */
export function searchData<T>(res: LightMyRequestResponse): SearchData<T> {
  expect(res.statusCode, res.body).toBe(200)
  const body = res.json()
  expect(body.result).toBe('success')
  return body.data as SearchData<T>
}

/** A form body as the SDK sends it. */
export const optionForm = (option: unknown) => ({ search_option: b64(option) })

/** Great-circle distance (km) as docs/search.md defines it. */
export function haversineKm(a: { lat: number; long: number }, b: { lat: number; long: number }) {
  const rad = (d: number) => (d * Math.PI) / 180
  const h =
    Math.sin(rad(b.lat - a.lat) / 2) ** 2 +
    Math.cos(rad(a.lat)) * Math.cos(rad(b.lat)) * Math.sin(rad(b.long - a.long) / 2) ** 2
  return 2 * 6371.0088 * Math.asin(Math.sqrt(Math.min(1, h)))
}
