import type { Kysely } from 'kysely'

// biome-ignore lint/suspicious/noExplicitAny: migrations describe the schema as it was then
type Db = Kysely<any>

/**
 * Each wrapped data key names the fingerprint of the master key that wrapped it (an HMAC under
 * that key: crypto/master-key.ts), so a node holding a current and previous master keys picks the
 * right one without trial decryption, and `coffer keys rotate` re-wraps exactly the rows not yet
 * under the current key. The backfill needs the master key, which never reaches the database nor
 * this migration: existing rows keep NULL here and the server fills them at start, in batches,
 * with the fingerprint of the key that opens each (modules/keys/fingerprint-backfill.ts). Until
 * then a NULL row is opened by trying each key held.
 */
export async function up(db: Db): Promise<void> {
  await db.schema.alterTable('data_keys').addColumn('master_key_fingerprint', 'text').execute()
}

export async function down(db: Db): Promise<void> {
  await db.schema.alterTable('data_keys').dropColumn('master_key_fingerprint').execute()
}
